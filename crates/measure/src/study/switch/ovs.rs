//! A private Open vSwitch (ovsdb-server and ovs-vswitchd with a netdev
//! bridge) for the switch study's comparisons.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A private ovsdb-server and ovs-vswitchd in a namespace with a netdev
/// (userspace) bridge `lrbench` and no ports: the flow table is what is
/// measured. Stopped and removed when dropped (the namespace too when it
/// made it).
pub(crate) struct Ovs {
    dir: PathBuf,
    ns: String,
    own_ns: bool,
}

/// Why Open vSwitch was skipped when it is not installed.
pub(crate) const NO_OVS: &str =
    "ovs-vswitchd not found (scripts/setup.sh installs openvswitch-switch)";

/// `ovs-vswitchd --version`'s version (`3.1.0`), None when it does not run.
pub(crate) fn ovs_version() -> Option<String> {
    let o = Command::new("ovs-vswitchd")
        .arg("--version")
        .output()
        .ok()?;
    let out = String::from_utf8_lossy(&o.stdout);
    let v = out.lines().next()?.split_whitespace().last()?;
    o.status.success().then(|| v.to_string())
}

impl Ovs {
    /// In a namespace of its own.
    pub(crate) fn start(dir: &Path) -> Result<Ovs, String> {
        Ovs::start_ns(dir, &format!("lrswb-{}", std::process::id()), true)
    }

    /// In the existing namespace `ns` (left there when dropped).
    pub(crate) fn start_in(dir: &Path, ns: &str) -> Result<Ovs, String> {
        Ovs::start_ns(dir, ns, false)
    }

    fn start_ns(dir: &Path, ns: &str, own_ns: bool) -> Result<Ovs, String> {
        let d = dir.join("ovs");
        std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
        let o = Ovs {
            dir: d.clone(),
            ns: ns.to_string(),
            own_ns,
        };
        let run = |args: &[&str], ns: bool| -> Result<(), String> {
            let mut c = if ns {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &o.ns]).args(args);
                c
            } else {
                let mut c = Command::new(args[0]);
                c.args(&args[1..]);
                c
            };
            let out = c
                .env("OVS_RUNDIR", &d)
                .env("OVS_DBDIR", &d)
                .env("OVS_LOGDIR", &d)
                .output()
                .map_err(|e| format!("{}: {e}", args[0]))?;
            if !out.status.success() {
                return Err(format!(
                    "{}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Ok(())
        };
        let p = |f: &str| d.join(f).display().to_string();
        if own_ns {
            run(&["ip", "netns", "add", &o.ns], false)?;
        }
        run(
            &[
                "ovsdb-tool",
                "create",
                &p("conf.db"),
                "/usr/share/openvswitch/vswitch.ovsschema",
            ],
            false,
        )?;
        let db = format!("unix:{}", p("db.sock"));
        run(
            &[
                "ovsdb-server",
                &p("conf.db"),
                &format!("--remote=punix:{}", p("db.sock")),
                &format!("--pidfile={}", p("ovsdb-server.pid")),
                "--detach",
                &format!("--log-file={}", p("ovsdb.log")),
            ],
            true,
        )?;
        run(
            &["ovs-vsctl", &format!("--db={db}"), "--no-wait", "init"],
            false,
        )?;
        run(
            &[
                "ovs-vswitchd",
                &db,
                &format!("--pidfile={}", p("ovs-vswitchd.pid")),
                "--detach",
                &format!("--log-file={}", p("vswitchd.log")),
            ],
            true,
        )?;
        for p in ["ovsdb-server", "ovs-vswitchd"] {
            if let Some(pid) = o.pid(p) {
                crate::guard::register_pid(pid as u32);
            }
        }
        run(
            &[
                "ovs-vsctl",
                &format!("--db={db}"),
                "--timeout=20",
                "add-br",
                "lrbench",
                "--",
                "set",
                "bridge",
                "lrbench",
                "datapath_type=netdev",
            ],
            false,
        )?;
        Ok(o)
    }

    /// `ovs-vsctl ARGS` against this instance's database; its output.
    pub(super) fn vsctl(&self, args: &[&str]) -> Result<String, String> {
        let db = format!("--db=unix:{}", self.dir.join("db.sock").display());
        let out = Command::new("ovs-vsctl")
            .args([db.as_str(), "--timeout=20"])
            .args(args)
            .env("OVS_RUNDIR", &self.dir)
            .output()
            .map_err(|e| format!("ovs-vsctl: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "ovs-vsctl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn pid(&self, daemon: &str) -> Option<i32> {
        std::fs::read_to_string(self.dir.join(format!("{daemon}.pid")))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    pub(crate) fn ofctl(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new("ovs-ofctl")
            .args(args)
            .env("OVS_RUNDIR", &self.dir)
            .output()
            .map_err(|e| format!("ovs-ofctl: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "ovs-ofctl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        for p in ["ovs-vswitchd", "ovsdb-server"] {
            if let Some(pid) = self.pid(p) {
                // SAFETY: kill(2) on the pid the daemon wrote; it is ours.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
                let t0 = Instant::now();
                while Path::new(&format!("/proc/{pid}")).exists()
                    && t0.elapsed() < Duration::from_secs(5)
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        if self.own_ns {
            let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
