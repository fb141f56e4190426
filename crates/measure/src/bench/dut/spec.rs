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
//! start_timeout = 30                       # seconds `start` may take (default 30)
//! stop_timeout = 10                        # seconds `stop` may take (default 10)
//! in_netns = true                          # commands run in the DuT's namespace (default)
//! both_ways = true                         # forwards d1 -> d0 too (default; --direction bi)
//!
//! [vm]                                     # optional: start, run and stop run in a guest
//! kernel = "/opt/linerate/guest/boot/vmlinuz-6.1.0-57-cloud-amd64"  # the default: scripts/setup.sh's
//! modules = "/opt/linerate/guest/lib/modules/6.1.0-57-cloud-amd64"  # default: lib/modules/RELEASE beside boot/
//! memory = 1024                            # MiB
//! accel = "auto"                           # KVM if a probe guest boots under it, else TCG; "kvm", "tcg"
//! boot_timeout = 60                        # seconds until the guest must forward
//! ```
//!
//! With a `[vm]` section the bench builds a guest ([`super::vm`]) and runs
//! `start`, `run` and `stop` there, `{d0}` and `{d1}` being the guest's NICs
//! (eth0, eth1) and `{linerate}` the guest's copy of this binary; `{spec_dir}`
//! and `{peers}` (the host's) are an error there, `boot_timeout` replaces
//! `ready_timeout` and `start_timeout`, and `in_netns` does not apply.
//!
//! `start` runs to completion (exit 0: started; exit 3: unavailable, the
//! DuT is skipped with its last line of output; anything else: failed).
//! `run` is a process kept running until the DuT is stopped: SIGINT to its
//! process group, SIGKILL 5 s later; if the last line it printed is a JSON
//! object, that is the DuT's own account in the report. Readiness is not
//! slept for: the bench sends probe frames until they come out of d1.
//!
//! Every command is bounded and contained ([`crate::pgroup`]): it runs in
//! a process group of its own, its output goes to a log file in
//! [`LOG_DIR`] (never to a pipe the bench would wait on: a background
//! child may hold that open for ever), and only the group's leader, the
//! shell, is waited for, at most `start_timeout`, `stop_timeout` or
//! [`VERSION_LIMIT`]; at the limit the whole group gets SIGKILL and the
//! error names the field, the limit and the log. What `start` leaves
//! running in its group (`my-fwd {d0} {d1} &`) is the DuT: its group is
//! killed after `stop` has run, and then every process still in the DuT's
//! namespace. The watchdog, if the bench dies, kills the groups and the
//! namespace's processes and runs `stop` (as a script in
//! `/run/linerate/dut-stop`), also within `stop_timeout`. A process that
//! leaves both its group (setsid) and the DuT's namespace (`in_netns =
//! false`) is beyond reach: a `stop` must end it.
//!
//! Placeholders in `start`, `run` and `stop`: `{ns}`, `{d0}`, `{d1}`,
//! `{cpu}`, `{linerate}` (this binary), `{peers}` (scripts/peers),
//! `{spec_dir}` (the spec file's directory), and `{gen_mac}`, `{d0_mac}`,
//! `{d1_mac}`, `{sink_mac}`, `{gen_ip}`, `{d0_ip}`, `{d1_ip}`, `{sink_ip}`
//! (with `_ip6` for IPv6). `version` knows only `{linerate}`, `{peers}`
//! and `{spec_dir}`. `{{` and `}}` are literal braces. Every command sees
//! the values in its environment as `DUT_NS`, `DUT_D0`, ... (the name in
//! upper case), and a placeholder is put in as a quoted reference to that
//! variable: `{spec_dir}` becomes `"${DUT_SPEC_DIR}"`. So a value is one
//! literal word whatever it holds (a directory named `my duts $(reboot)`
//! stays a name), unquoted or inside double quotes
//! (`"afpacket:{d0}?ring=v3"`); inside single quotes it would not be
//! filled in, so a placeholder there is an error.

use super::device::{Dut, DutEnv, DutError, READY_TIMEOUT};
use crate::pgroup::{last_line, tail_lines, Group};
use crate::testbed::{DutMode, Testbed};
use linerate_io::host::kernel_release;
use serde::Deserialize;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

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

/// Default time `start` may take.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Default time `stop` may take.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The time `version` may take.
pub const VERSION_LIMIT: Duration = Duration::from_secs(10);

/// How long a `run` process has to exit after SIGINT before SIGKILL.
const RUN_STOP_GRACE: Duration = Duration::from_secs(5);

/// Where the DuTs' commands write their output: one file per command and
/// DuT session, `PID-NS-NAME.FIELD.log` (`PID-NAME.version.log`), appended
/// to (a DuT started again on a bed of the same name), never through a
/// symlink. The logs of a run stay until the next run starts, which removes
/// those of runs no longer going.
pub const LOG_DIR: &str = "/run/linerate/dut-log";

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
    start_timeout: Option<f64>,
    stop_timeout: Option<f64>,
    in_netns: Option<bool>,
    both_ways: Option<bool>,
    vm: Option<super::vm::section::VmFile>,
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
    pub start_timeout: Duration,
    pub stop_timeout: Duration,
    pub in_netns: bool,
    /// Forwards d1 -> d0 too (default): measured both ways with `--direction bi`.
    pub both_ways: bool,
    /// Where it came from ("FILE" or "built-in NAME"), for errors.
    pub origin: String,
    /// [`crate::bench::history::spec_hash`] of the text as read: the history
    /// pools a DuT's results only with those of the same spec (an edited
    /// file is another DuT, whatever its name and version say).
    pub text_hash: String,
    /// `{spec_dir}`.
    pub dir: PathBuf,
    /// With a `[vm]` section: `start`, `run` and `stop` run in a guest
    /// ([`super::vm`]).
    pub vm: Option<super::vm::section::VmSpec>,
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
                shell_expand(c, known).map_err(|e| field(name, e))?;
            }
        }
        let seconds = |name: &str, v: Option<f64>, default: Duration| match v {
            None => Ok(default),
            Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Ok(Duration::from_secs_f64(s)),
            Some(s) => Err(field(
                name,
                format!("{s}: seconds, over 0 and at most 3600"),
            )),
        };
        let ready_timeout = seconds("ready_timeout", f.ready_timeout, READY_TIMEOUT)?;
        let start_timeout = seconds("start_timeout", f.start_timeout, START_TIMEOUT)?;
        let stop_timeout = seconds("stop_timeout", f.stop_timeout, STOP_TIMEOUT)?;
        let vm = match f.vm {
            Some(v) => Some(super::vm::section::VmSpec::check(v, dir, &field)?),
            None => None,
        };
        if vm.is_some() {
            // The guest has neither the spec's directory nor scripts/peers.
            let guest: Vec<&str> = all
                .iter()
                .copied()
                .filter(|p| !matches!(*p, "spec_dir" | "peers"))
                .collect();
            for (name, cmd) in [("start", &f.start), ("run", &f.run), ("stop", &f.stop)] {
                if let Some(c) = cmd {
                    shell_expand(c, &guest).map_err(|e| {
                        field(
                            name,
                            format!(
                                "{e} (in a guest, [vm]: {{spec_dir}} and {{peers}} are the host's)"
                            ),
                        )
                    })?;
                }
            }
        }
        Ok(DutSpec {
            name: f.name,
            description: f.description,
            mode,
            start: f.start,
            run: f.run,
            stop: f.stop,
            version: f.version,
            ready_timeout,
            start_timeout,
            stop_timeout,
            in_netns: f.in_netns.unwrap_or(true),
            both_ways: f.both_ways.unwrap_or(true),
            origin: origin.to_string(),
            text_hash: crate::bench::history::spec_hash(text),
            dir: dir.to_path_buf(),
            vm,
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

/// Where a placeholder stands in a command, as far as `sh` quoting goes.
#[derive(Clone, Copy, PartialEq)]
enum Quoting {
    None,
    Single,
    Double,
    Comment,
}

/// `template` as the text for `sh -c`: every placeholder (one of `known`)
/// a reference to its variable, double-quoted where it stands unquoted
/// (`{d0}`: `"${DUT_D0}"`), bare inside double quotes (`"x:{d0}"`:
/// `"x:${DUT_D0}"`). `sh` fills a quoted reference in as one literal word,
/// whatever the value holds; and whatever the quoting, it never runs what
/// a value holds (the value is in the environment, never in the text).
/// Inside single quotes nothing is filled in: a placeholder there is an
/// error. The quoting is followed as far as `'`, `"`, `\`, `#` comments
/// and `$(...)` go (not backquotes, here-documents or `case` patterns).
pub fn shell_expand(template: &str, known: &[&str]) -> Result<String, String> {
    // Placeholders stand out as NUL-delimited names for the walk below (a
    // NUL cannot be in the text: TOML strings hold none, and `sh -c` could
    // not take one).
    if template.contains('\0') {
        return Err("a NUL character".into());
    }
    let marked = expand(template, |k| known.contains(&k).then(|| format!("\0{k}\0")))?;
    let mut out = String::with_capacity(marked.len());
    // The quoting of each `$(` or `(` level, the innermost last.
    let mut stack = vec![Quoting::None];
    let (mut escaped, mut word_start, mut dollar) = (false, true, false);
    let mut parts = marked.split('\0');
    let mut text = parts.next();
    while let Some(t) = text {
        for c in t.chars() {
            out.push(c);
            let q = stack.last_mut().expect("the outermost level stays");
            let was_dollar = std::mem::replace(&mut dollar, false);
            if escaped {
                escaped = false;
                word_start = false;
                continue;
            }
            match (*q, c) {
                (Quoting::None | Quoting::Double, '\\') => escaped = true,
                (Quoting::None | Quoting::Double, '$') => dollar = true,
                (Quoting::None, '\'') => *q = Quoting::Single,
                (Quoting::None, '"') => *q = Quoting::Double,
                (Quoting::None, '#') if word_start => *q = Quoting::Comment,
                (Quoting::Single, '\'') | (Quoting::Double, '"') | (Quoting::Comment, '\n') => {
                    *q = Quoting::None
                }
                (Quoting::Double, '(') if was_dollar => stack.push(Quoting::None),
                (Quoting::None, '(') => stack.push(Quoting::None),
                (Quoting::None, ')') if stack.len() > 1 => {
                    stack.pop();
                }
                _ => {}
            }
            word_start = c.is_whitespace() || ";&|()<>".contains(c);
        }
        let Some(name) = parts.next() else { break };
        let var = env_name(name);
        match stack.last() {
            Some(Quoting::Single) => {
                return Err(format!(
                    "placeholder {{{name}}} inside single quotes, where it is not filled in: put it outside them or in double quotes"
                ))
            }
            Some(Quoting::Double) => out.push_str(&format!("${{{var}}}")),
            _ => out.push_str(&format!("\"${{{var}}}\"")),
        }
        word_start = false;
        dollar = false;
        text = parts.next();
    }
    Ok(out)
}

/// The environment variable of placeholder `name` (`d0`: `DUT_D0`).
pub fn env_name(name: &str) -> String {
    format!("DUT_{}", name.to_ascii_uppercase())
}

/// A log file of one command ([`LOG_DIR`]), and where this command's
/// output starts in it.
pub(crate) struct Log {
    pub(crate) path: PathBuf,
    pub(crate) file: File,
    from: u64,
}

impl Log {
    /// Open (append to) `LOG_DIR/file_name`, its header line written.
    pub(crate) fn open(file_name: &str, header: &str) -> Result<Log, String> {
        use std::io::{Seek, SeekFrom, Write};
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let dir = Path::new(LOG_DIR);
        let path = dir.join(file_name);
        let fail = |e: std::io::Error| format!("log {}: {e}", path.display());
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(fail)?;
        prune_logs(dir);
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .read(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(fail)?;
        writeln!(file, "--- {header} ---").map_err(fail)?;
        let from = file.seek(SeekFrom::End(0)).map_err(fail)?;
        Ok(Log { path, file, from })
    }

    /// What the command wrote (its last [`crate::pgroup::TAIL_BYTES`]).
    pub(crate) fn lines(&mut self) -> Vec<String> {
        tail_lines(&mut self.file, self.from)
    }

    /// Its last line that is not blank.
    fn last(&mut self) -> String {
        last_line(&self.lines())
    }
}

/// Remove the logs of runs that no longer go (their pid is gone), once
/// per process: a log stays until the next run.
fn prune_logs(dir: &Path) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let me = std::process::id();
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.split_once('-'))
                .and_then(|(p, _)| p.parse::<u32>().ok())
            else {
                continue;
            };
            if pid != me && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_file(e.path());
            }
        }
    });
}

/// The `run` process of a started DuT.
struct Running {
    group: Group,
    log: Log,
}

/// A DuT described by a [`DutSpec`].
pub struct SpecDut {
    pub spec: DutSpec,
    /// Extra environment of every command (e.g. `OVS_FLOWS_FILE`).
    pub env: Vec<(String, String)>,
    /// The namespace it was started in and the watchdog's stop script.
    started: Option<(String, Option<PathBuf>)>,
    /// What `start` left running in its process group: the DuT's own
    /// processes, killed after `stop`.
    start_group: Option<Group>,
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
            start_group: None,
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

    /// `sh -c CMD` with the placeholders put in (as references to their
    /// variables), in the DuT's namespace (or the root one), with the
    /// values and `env` in its environment.
    fn command(&self, field: &str, cmd: &str, ns: &str) -> Result<Command, DutError> {
        let names: Vec<&str> = self.values.iter().map(|(k, _)| k.as_str()).collect();
        let text = shell_expand(cmd, &names)
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
        c.envs(self.values.iter().map(|(k, v)| (env_name(k), v.clone())))
            .envs(self.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        Ok(c)
    }

    /// The log file of `field` in namespace `ns`.
    fn log_name(&self, field: &str, ns: &str) -> String {
        format!("{}-{ns}-{}.{field}.log", std::process::id(), self.spec.name)
    }

    /// Command `field` started as a process group of its own (die with us,
    /// on every CPU), its output in its log.
    fn spawn(&self, field: &str, cmd: &str, ns: &str) -> Result<(Group, Log), DutError> {
        let mut c = self.command(field, cmd, ns)?;
        let log = Log::open(
            &self.log_name(field, ns),
            &format!(
                "`{field}` of DuT {} ({}) in namespace {ns}",
                self.spec.name,
                self.spec.origin.replace('\n', " ")
            ),
        )
        .map_err(|e| DutError::Failed(format!("{field}: {e}")))?;
        crate::guard::die_with_parent(&mut c);
        super::device::on_every_cpu(&mut c);
        let g = Group::spawn(&mut c, &log.file, &log.file)
            .map_err(|e| DutError::Failed(format!("{field}: {e}")))?;
        Ok((g, log))
    }

    /// "FIELD: still running after N s (FIELD_timeout): its process group
    /// killed; log PATH".
    fn timed_out(field: &str, limit: Duration, log: &Log) -> DutError {
        DutError::Failed(format!(
            "{field}: still running after {} s ({field}_timeout): its process group killed; log {}",
            limit.as_secs_f64(),
            log.path.display()
        ))
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
    /// `SCRIPT stop NS` (crate::guard's peer protocol) that removes itself
    /// and runs the command, its output appended to the stop log. The
    /// watchdog runs it in a process group of its own within
    /// `stop_timeout`.
    fn write_stop_script(&self, ns: &str) -> Result<Option<PathBuf>, DutError> {
        let Some(stop) = &self.spec.stop else {
            return Ok(None);
        };
        let c = self.command("stop", stop, ns)?;
        let fail = |e: std::io::Error| DutError::Failed(format!("stop script: {e}"));
        let dir = Path::new("/run/linerate/dut-stop");
        std::fs::create_dir_all(dir).map_err(fail)?;
        let quote = |s: &std::ffi::OsStr| shell_quote(&s.to_string_lossy());
        let argv: Vec<String> = std::iter::once(c.get_program())
            .chain(c.get_args())
            .map(quote)
            .collect();
        let envs: Vec<String> = c
            .get_envs()
            .filter_map(|(k, v)| Some(format!("export {}={}", k.to_string_lossy(), quote(v?))))
            .collect();
        let log = shell_quote(
            &Path::new(LOG_DIR)
                .join(self.log_name("stop", ns))
                .display()
                .to_string(),
        );
        let body = format!(
            "#!/bin/sh\n# linerate bench: the stop command of DuT {} ({}), run by the watchdog if the bench dies.\n[ \"$1\" = stop ] || exit 2\n# Gone before the command runs: the watchdog may kill this at its limit.\nrm -f \"$0\"\n{}\nmkdir -p {}\necho '--- `stop` of the DuT, run by the watchdog ---' >>{log}\n{} </dev/null >>{log} 2>&1\nrc=$?\n[ $rc = 0 ] || echo \"exit status $rc; log \"{log} >&2\nexit $rc\n",
            self.spec.name,
            self.spec.origin.replace('\n', " "),
            envs.join("\n"),
            shell_quote(LOG_DIR),
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
                .custom_flags(libc::O_NOFOLLOW)
                .open(&p)
                .map_err(fail)?;
            f.write_all(body.as_bytes()).map_err(fail)?;
        }
        Ok(Some(p))
    }

    /// Run `stop` (if any, within `stop_timeout`), kill what `start` left
    /// running and every process still in the DuT's namespace, and forget
    /// the watchdog's script.
    fn run_stop(&mut self) -> Result<(), DutError> {
        let Some((ns, script)) = self.started.take() else {
            self.start_group = None;
            return Ok(());
        };
        let mut r = Ok(());
        if let Some(stop) = self.spec.stop.clone() {
            r = self.spawn("stop", &stop, &ns).and_then(|(mut g, mut log)| {
                let limit = self.spec.stop_timeout;
                let st = g.wait_for(limit);
                g.kill();
                match st {
                    None => Err(Self::timed_out("stop", limit, &log)),
                    Some(s) if s.success() => Ok(()),
                    Some(s) => Err(DutError::Failed(format!(
                        "stop: {s}: {} (log {})",
                        log.last(),
                        log.path.display()
                    ))),
                }
            });
        }
        // The DuT's processes that `start` left, once `stop` had its say;
        // then whatever else is left in its namespace (a child that left
        // the group with setsid).
        self.start_group = None;
        crate::reap::kill_netns_processes(&ns);
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
        let early = r.group.exited();
        r.group.signal(libc::SIGINT);
        let status = r.group.wait_for(RUN_STOP_GRACE);
        // Whatever is left in the group (it may have forked).
        r.group.kill();
        let what = "run";
        let log = r.log.path.display().to_string();
        if let Some(s) = early {
            return Err(DutError::Failed(format!(
                "{what}: ended with {s} before the DuT was stopped: {} (log {log})",
                r.log.last()
            )));
        }
        let Some(s) = status else {
            return Err(DutError::Failed(format!(
                "{what}: still running {} s after SIGINT: killed (log {log})",
                RUN_STOP_GRACE.as_secs()
            )));
        };
        use std::os::unix::process::ExitStatusExt;
        let by_stop_signal = matches!(s.signal(), Some(libc::SIGINT) | Some(libc::SIGTERM));
        if !(s.success() || by_stop_signal || s.code() == Some(130)) {
            return Err(DutError::Failed(format!(
                "{what}: ended with {s}: {} (log {log})",
                r.log.last()
            )));
        }
        Ok(r.log
            .lines()
            .iter()
            .rev()
            .filter(|l| l.trim_start().starts_with('{'))
            .find_map(|l| serde_json::from_str(l).ok()))
    }
}

/// `s` as one word for `sh`: in single quotes, a `'` as `'\''`.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

impl DutSpec {
    /// Where it is described, as the report says it: "built-in", or its file.
    pub fn origin_label(&self) -> String {
        if self.origin.starts_with("built-in") {
            "built-in".into()
        } else {
            self.origin.clone()
        }
    }
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
        self.spec.origin_label()
    }
    fn spec_hash(&self) -> Option<String> {
        Some(self.spec.text_hash.clone())
    }
    fn version(&self) -> String {
        let Some(v) = &self.spec.version else {
            return format!("Linux {}", kernel_release());
        };
        match self.run_version(v) {
            Ok(s) => s,
            Err(e) => format!("unknown (version: {e})"),
        }
    }
    fn start(&mut self, bed: &mut Testbed, env: &DutEnv) -> Result<(), DutError> {
        self.set_values(bed, env);
        let ns = bed.ns_dut().to_string();
        // Registered before anything starts: the watchdog runs `stop` if we die.
        let script = self.write_stop_script(&ns)?;
        if let Some(s) = &script {
            crate::guard::register_peer_limit(s, &ns, self.spec.stop_timeout);
        }
        self.started = Some((ns.clone(), script));
        if let Some(start) = self.spec.start.clone() {
            let (mut g, mut log) = match self.spawn("start", &start, &ns) {
                Ok(x) => x,
                Err(e) => {
                    let _ = self.run_stop();
                    return Err(e);
                }
            };
            let limit = self.spec.start_timeout;
            let err = match g.wait_for(limit) {
                // Started: what it left running in its group is the DuT.
                Some(s) if s.success() => None,
                None => Some(Self::timed_out("start", limit, &log)),
                Some(s) => {
                    let line = log.last();
                    Some(if s.code() == Some(3) {
                        DutError::Unavailable(line)
                    } else {
                        DutError::Failed(format!("start: {s}: {line} (log {})", log.path.display()))
                    })
                }
            };
            if let Some(e) = err {
                g.kill();
                // Half-started: whatever `stop` undoes.
                let _ = self.run_stop();
                return Err(e);
            }
            self.start_group = Some(g);
        }
        if let Some(run) = self.spec.run.clone() {
            match self.spawn("run", &run, &ns) {
                Ok((group, log)) => self.running = Some(Running { group, log }),
                Err(e) => {
                    let _ = self.run_stop();
                    return Err(e);
                }
            }
        }
        Ok(())
    }
    fn alive(&mut self) -> Result<(), DutError> {
        let Some(r) = &mut self.running else {
            return Ok(());
        };
        if let Some(s) = r.group.exited() {
            return Err(DutError::Failed(format!(
                "run: ended with {s}: {} (log {})",
                r.log.last(),
                r.log.path.display()
            )));
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

impl SpecDut {
    /// `version` with its placeholders, in the root namespace, within
    /// [`VERSION_LIMIT`]: the first line it printed on stdout (stderr goes
    /// to its log).
    fn run_version(&self, v: &str) -> Result<String, String> {
        let exe = std::env::current_exe().unwrap_or_default();
        let peers = super::device::find_peers_dir(&exe).unwrap_or_default();
        let values = [
            ("linerate", exe.display().to_string()),
            ("peers", peers.display().to_string()),
            ("spec_dir", self.spec.dir.display().to_string()),
        ];
        let text = shell_expand(v, BEDLESS)?;
        let mut c = Command::new("sh");
        c.args(["-c", &text])
            .envs(values.iter().map(|(k, v)| (env_name(k), v)))
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        crate::guard::die_with_parent(&mut c);
        let mut log = Log::open(
            &format!("{}-{}.version.log", std::process::id(), self.spec.name),
            &format!("`version` of DuT {}: its stderr", self.spec.name),
        )?;
        let mut out = crate::pgroup::scratch_file().map_err(|e| e.to_string())?;
        let mut g = Group::spawn(&mut c, &out, &log.file).map_err(|e| e.to_string())?;
        let st = g.wait_for(VERSION_LIMIT);
        g.kill();
        match st {
            None => Err(format!(
                "still running after {} s: its process group killed; log {}",
                VERSION_LIMIT.as_secs(),
                log.path.display()
            )),
            Some(s) if s.success() => Ok(tail_lines(&mut out, 0)
                .iter()
                .map(|l| l.trim())
                .find(|l| !l.is_empty())
                .unwrap_or("unknown")
                .to_string()),
            Some(_) => Err(log.last()),
        }
    }
}

impl Drop for SpecDut {
    fn drop(&mut self) {
        let _ = self.stop_running();
        let _ = self.run_stop();
    }
}

/// The text of the built-in spec `ovs-afxdp` (the base of `ovs-afxdp-10k`).
pub(crate) const OVS_AFXDP: &str = include_str!("../../../duts/ovs-afxdp.toml");

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

    /// Placeholders become quoted references to their variables, outside
    /// quotes and inside double quotes; inside single quotes they are an
    /// error, as far as the quotes can be followed.
    #[test]
    fn placeholders_become_quoted_variable_references() {
        let k = &["d0", "spec_dir"];
        assert_eq!(
            shell_expand("nft -f {spec_dir}/fw.nft {{x}}", k).unwrap(),
            "nft -f \"${DUT_SPEC_DIR}\"/fw.nft {x}"
        );
        assert_eq!(
            shell_expand("fwd \"afpacket:{d0}?ring=v3\"", k).unwrap(),
            "fwd \"afpacket:${DUT_D0}?ring=v3\""
        );
        assert_eq!(
            shell_expand("x \"$(cat {d0} \"{d0}\")\" $((1+2)) {d0}", k).unwrap(),
            "x \"$(cat \"${DUT_D0}\" \"${DUT_D0}\")\" $((1+2)) \"${DUT_D0}\""
        );
        for ok in [
            "echo \"it's\" {d0}",
            "echo it\\'s {d0}",
            "# don't\necho {d0}",
            "echo 'a' {d0} 'b'",
            "echo 'a\"' {d0} '",
            "echo a#'b' ; # c'\necho {d0}",
        ] {
            assert!(shell_expand(ok, k).is_ok(), "{ok:?}");
        }
        for bad in [
            "echo '{d0}'",
            "echo \"x\" 'a {d0}'",
            "echo a#'b {d0}'",
            "echo \"$(cat '{d0}')\"",
        ] {
            let e = shell_expand(bad, k).unwrap_err();
            assert!(e.contains("{d0} inside single quotes"), "{bad:?}: {e}");
        }
        assert!(shell_expand("echo {d1}", k)
            .unwrap_err()
            .contains("not known here"));
    }

    /// Whatever a value holds, `sh` takes it as one literal word: spaces,
    /// quotes, `$(...)`, backquotes, variables, newlines and globs.
    #[test]
    fn values_are_literal_words_for_sh() {
        let dir = std::env::temp_dir().join(format!("lr-spec-quote-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let marker = dir.join("pwned");
        let m = marker.display();
        let value =
            format!("my duts $(touch {m}) `touch {m}` 'q' \"d\" $HOME * ; touch {m}\nline2 \\");
        let template = "printf '<%s>\\n' {spec_dir} \"x:{spec_dir}:y\" \"$(printf %s {spec_dir})\"";
        let text = shell_expand(template, &["spec_dir"]).unwrap();
        let out = Command::new("sh")
            .args(["-c", &text])
            .env(env_name("spec_dir"), &value)
            .current_dir(&dir)
            .output()
            .unwrap();
        let got = String::from_utf8_lossy(&out.stdout).into_owned();
        let exists = marker.exists();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!exists, "the value ran a command");
        assert_eq!(got, format!("<{value}>\n<x:{value}:y>\n<{value}>\n"));
    }

    #[test]
    fn a_good_spec_parses() {
        let s = parse(OK).unwrap();
        assert_eq!(s.name, "a");
        assert_eq!(s.mode, DutMode::IpForward);
        assert_eq!(s.ready_timeout, READY_TIMEOUT);
        assert_eq!(s.start_timeout, START_TIMEOUT);
        assert_eq!(s.stop_timeout, STOP_TIMEOUT);
        let t = parse(&format!("{OK}start_timeout = 2.5\nstop_timeout = 1\n")).unwrap();
        assert_eq!(t.start_timeout, Duration::from_millis(2500));
        assert_eq!(t.stop_timeout, Duration::from_secs(1));
        assert!(s.in_netns);
    }

    /// Every error is one line naming the file and the field.
    #[test]
    fn a_spec_file_is_keyed_by_its_text() {
        // The history pools a DuT only with results of the same text: an
        // edited command (same name, same version) is another DuT.
        let a = parse(OK).unwrap();
        assert_eq!(a.text_hash, crate::bench::history::spec_hash(OK));
        assert_eq!(parse(OK).unwrap().text_hash, a.text_hash);
        let edited = OK.replace("start = \"true\"", "start = \"true --fast\"");
        assert_ne!(parse(&edited).unwrap().text_hash, a.text_hash);
        assert_eq!(SpecDut::new(a.clone()).spec_hash(), Some(a.text_hash));
    }

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
            ("name = \"a\"\ndescription = \"b\"\nmode = \"l2\"\nstart = \"x\"\nstart_timeout = 0\n", "field `start_timeout`: 0: seconds"),
            ("name = \"a\"\ndescription = \"b\"\nmode = \"l2\"\nstart = \"x\"\nstop_timeout = 4000\n", "field `stop_timeout`: 4000: seconds"),
            ("name = \"a\"\ndescription = \"b\"\nmode = \"l2\"\nrun = \"fwd 'afpacket:{d0}'\"\n", "field `run`: placeholder {d0} inside single quotes"),
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
