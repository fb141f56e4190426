//! A private Open vSwitch for the tests ([`Ovs`]), as
//! scripts/peers/dut-ovs.sh runs one for the benches: its own
//! ovsdb-server and ovs-vswitchd with a run directory of their own (a
//! private temporary directory: nothing shared with a system Open vSwitch),
//! ovs-vswitchd inside the switch's network namespace, one bridge with
//! the userspace datapath (datapath_type=netdev). Both daemons are children
//! of the test, stopped on drop (also when the test fails).

use super::{require_tools, wait_until, Proc, TempDir};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The Open vSwitch programs an [`Ovs`] runs (scripts/setup.sh installs them).
pub const OVS_TOOLS: [&str; 6] = [
    "ovsdb-tool",
    "ovsdb-server",
    "ovs-vswitchd",
    "ovs-vsctl",
    "ovs-ofctl",
    "ovs-appctl",
];

const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

pub struct Ovs {
    pub bridge: String,
    rd: TempDir,
    vswitchd: Option<Proc>,
    db: Option<Proc>,
}

impl Ovs {
    /// Start it with bridge `bridge` (fail_mode=secure: no flow until the
    /// test adds some) in namespace `ns`, whose `ports` (OpenFlow port
    /// number, interface in `ns`) are plain system netdevs (netdev-linux,
    /// polled by ovs-vswitchd's main thread). Returns once every port has
    /// its number and no error.
    pub fn start(ns: &str, bridge: &str, ports: &[(u32, String)]) -> Ovs {
        require_tools(&OVS_TOOLS);
        assert!(
            Path::new(SCHEMA).is_file(),
            "no Open vSwitch schema at {SCHEMA}: scripts/setup.sh installs it \
             (apt-get install openvswitch-switch)"
        );
        let mut o = Ovs {
            bridge: bridge.to_string(),
            rd: TempDir::new("ovs"),
            vswitchd: None,
            db: None,
        };
        let rd = o.rd.path().to_path_buf();
        let p = |f: &str| rd.join(f).display().to_string();
        let out = o
            .cmd("ovsdb-tool")
            .arg("create")
            .arg(p("conf.db"))
            .arg(SCHEMA)
            .output();
        check(out, "ovsdb-tool create");
        o.db = Some(
            o.daemon(
                Command::new("ovsdb-server")
                    .arg(p("conf.db"))
                    .arg(format!("--remote=punix:{}", p("db.sock")))
                    .arg(format!("--unixctl={}", p("ovsdb-server.ctl"))),
                "ovsdb-server",
            ),
        );
        wait_until(Duration::from_secs(20), "ovsdb-server's socket", || {
            o.rd.join("db.sock").exists()
        });
        o.vsctl(&["--no-wait", "init"]);
        o.vswitchd = Some(
            o.daemon(
                Command::new("ip")
                    .args(["netns", "exec", ns, "ovs-vswitchd"])
                    .arg(format!("unix:{}", p("db.sock")))
                    .arg(format!("--unixctl={}", p("ovs-vswitchd.ctl"))),
                "ovs-vswitchd",
            ),
        );
        // Without --no-wait, ovs-vsctl returns once ovs-vswitchd has taken
        // the change in (its own --timeout bounds that).
        o.vsctl(&[
            "add-br",
            bridge,
            "--",
            "set",
            "bridge",
            bridge,
            "datapath_type=netdev",
            "fail_mode=secure",
        ]);
        for (no, ifname) in ports {
            o.vsctl(&[
                "add-port",
                bridge,
                ifname,
                "--",
                "set",
                "interface",
                ifname,
                &format!("ofport_request={no}"),
            ]);
            let err = o.vsctl(&["get", "interface", ifname, "error"]);
            let err = err
                .trim()
                .trim_matches(|c| c == '[' || c == ']' || c == '"');
            assert!(err.is_empty(), "Open vSwitch port {ifname}: {err}");
            let got = o.vsctl(&["get", "interface", ifname, "ofport"]);
            assert_eq!(got.trim(), no.to_string(), "{ifname}'s OpenFlow port");
        }
        o
    }

    /// An Open vSwitch command that talks to this instance (run dir,
    /// database and bridge management sockets in the private directory).
    pub fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new(prog);
        let rd = self.rd.path();
        for v in ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR"] {
            c.env(v, rd);
        }
        c.env("OVS_PKGDATADIR", "/usr/share/openvswitch");
        c
    }

    fn daemon(&self, c: &mut Command, name: &str) -> Proc {
        let rd = self.rd.path();
        c.arg(format!(
            "--pidfile={}",
            rd.join(format!("{name}.pid")).display()
        ))
        .arg(format!(
            "--log-file={}",
            rd.join(format!("{name}.log")).display()
        ))
        .args(["--no-chdir", "-vconsole:off"]);
        for v in ["OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR"] {
            c.env(v, rd);
        }
        let err = std::fs::File::create(rd.join(format!("{name}.stderr"))).unwrap();
        let child = c
            .env("OVS_PKGDATADIR", "/usr/share/openvswitch")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        Proc::new(child, name)
    }

    /// `ovs-vsctl ARGS` on this instance's database (must succeed); stdout.
    pub fn vsctl(&self, args: &[&str]) -> String {
        let db = format!("--db=unix:{}", self.rd.join("db.sock").display());
        let out = self
            .cmd("ovs-vsctl")
            .args([&db, "--timeout=20"])
            .args(args)
            .output();
        self.check(out, &format!("ovs-vsctl {}", args.join(" ")))
    }

    /// `ovs-ofctl COMMAND BRIDGE ARGS` (must succeed); stdout.
    pub fn ofctl(&self, command: &str, args: &[&str]) -> String {
        let out = self
            .cmd("ovs-ofctl")
            .args([command, &self.bridge])
            .args(args)
            .output();
        self.check(out, &format!("ovs-ofctl {command} {}", args.join(" ")))
    }

    /// `ovs-appctl -t ovs-vswitchd ARGS` (must succeed); stdout.
    pub fn appctl(&self, args: &[&str]) -> String {
        let t = self.rd.join("ovs-vswitchd.ctl");
        let out = self
            .cmd("ovs-appctl")
            .arg("-t")
            .arg(t)
            .args(["--timeout=20"])
            .args(args)
            .output();
        self.check(out, &format!("ovs-appctl {}", args.join(" ")))
    }

    /// Fail the test with ovs-vswitchd's stderr and log if it has exited.
    pub fn assert_running(&mut self) {
        let exited = self
            .vswitchd
            .as_mut()
            .and_then(|p| p.child_mut())
            .is_some_and(|c| c.try_wait().unwrap().is_some());
        assert!(!exited, "ovs-vswitchd exited: {}", self.log_tail());
    }

    /// The last lines of ovs-vswitchd's log and stderr.
    pub fn log_tail(&self) -> String {
        let mut s = String::new();
        for f in ["ovs-vswitchd.stderr", "ovs-vswitchd.log"] {
            let text = std::fs::read_to_string(self.rd.join(f)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            s.push_str(&format!("--- {f} (last lines)\n"));
            for l in &lines[lines.len().saturating_sub(20)..] {
                s.push_str(l);
                s.push('\n');
            }
        }
        s
    }

    /// The run directory (sockets, logs, database).
    pub fn run_dir(&self) -> PathBuf {
        self.rd.path().to_path_buf()
    }

    fn check(&self, out: std::io::Result<std::process::Output>, what: &str) -> String {
        match out {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
            Ok(o) => panic!(
                "{what}: {}\n{}",
                String::from_utf8_lossy(&o.stderr),
                self.log_tail()
            ),
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

fn check(out: std::io::Result<std::process::Output>, what: &str) {
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!("{what}: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => panic!("{what}: {e}"),
    }
}

/// SIGTERM, then up to `t` for the exit; [`Proc`]'s drop kills it after that.
fn stop(p: &mut Option<Proc>, t: Duration) {
    let Some(mut p) = p.take() else { return };
    let Some(c) = p.child_mut() else { return };
    if c.try_wait().ok().flatten().is_none() {
        p.signal(libc::SIGTERM);
        let start = Instant::now();
        while start.elapsed() < t {
            match p.child_mut().unwrap().try_wait() {
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                _ => break,
            }
        }
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        // ovs-vswitchd first (it removes its ports and the bridge's
        // internal port on the way out), then the database; then the run
        // directory goes with `rd`.
        stop(&mut self.vswitchd, Duration::from_secs(5));
        stop(&mut self.db, Duration::from_secs(5));
    }
}
