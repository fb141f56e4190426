//! A device under test inside a virtual machine (seed 001's question: the
//! same forwarder in a guest against on the host).
//!
//! ```text
//!   NAME-dut namespace                                  the guest (qemu)
//!  [ d0 ] <-XDP redirect-> [ tap0 ] <-virtio-net-> [ eth0  DuT  eth1 ] <-> [ tap1 ] <-XDP-> [ d1 ]
//! ```
//!
//! The bench builds the guest itself ([`image`]): Debian's cloud kernel
//! (unpacked by `scripts/setup.sh` into [`image::GUEST_ROOT`]) and an initramfs with busybox, the virtio-net modules, this
//! `linerate` binary and the DuT spec's commands, which run inside the
//! guest with `{d0}` = eth0, `{d1}` = eth1, `{linerate}` = the guest's copy
//! and `{cpu}` = 0. The guest's NICs carry d0's and d1's MACs and
//! addresses (and static neighbours), so the generator's frames are those
//! of the same DuT on the host. Each NIC is a tap in the DuT's namespace
//! joined to its veth by a bare XDP redirect both ways (the cheapest
//! in-kernel path there is, [`BareRedirect`](super::BareRedirect)'s).
//!
//! qemu runs in the DuT's namespace with all its threads on the DuT's CPU,
//! its console in a log ([`super::spec::LOG_DIR`]); `linerate-guest: `
//! lines there are the guest init's ([`image::INIT`]). Acceleration: KVM
//! when a probe guest boots under it within [`KVM_PROBE_LIMIT`], else TCG,
//! whose results are emulation, not comparable with the host. Readiness is
//! the bench's probe frames, as for every DuT; `stop` writes "stop" on the
//! console, the guest stops the DuT (its account is its last JSON line),
//! powers off, and qemu ends. qemu is a process group registered with the
//! watchdog and lives in the DuT's namespace, and the taps live there too:
//! a killed bench leaves neither.

pub mod image;
pub mod section;

use super::device::{Dut, DutEnv, DutError};
use super::spec::{env_name, shell_expand, shell_quote, DutSpec, Log, SpecDut};
use crate::pgroup::Group;
use crate::testbed::{DutMode, Testbed};
use image::{Image, Kernel};
use linerate_io::xdp::fwd::XdpRedirectBare;
use linerate_io::xdp::AttachMode;
pub use section::{Accel, AccelChoice, VmFile, VmSpec, BOOT_TIMEOUT};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A KVM guest that has not printed its first line by then does not boot
/// (on hosts without nested virtualisation KVM guests hang in early boot,
/// or qemu aborts at once: both were seen on this project's machines).
pub const KVM_PROBE_LIMIT: Duration = Duration::from_secs(10);

/// The most a guest's console log may hold (bytes): qemu is its only
/// writer, and is killed (SIGXFSZ) beyond.
const CONSOLE_LIMIT: libc::rlim_t = 64 << 20;

/// Where the guests' boot files are built: `PID-NS-NAME/` (`PID-kvm-probe/`
/// for the probe), removed when the guest stops, by the watchdog if the
/// bench is killed while a guest runs, and else by the next run.
pub const IMAGE_DIR: &str = "/run/linerate/vm";

/// `vm:NAME`: the built-in spec DuT NAME (one of [`GUEST_DUTS`]) in a guest
/// with the default `[vm]` settings.
pub fn builtin_in_guest(name: &str, spec_text: &str) -> VmDut {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("duts");
    let mut s = match DutSpec::parse(spec_text, &format!("built-in {name}"), &dir) {
        Ok(s) => s,
        // The built-in files are checked by a unit test.
        Err(e) => panic!("{e}"),
    };
    s.name = format!("vm:{name}");
    s.description = format!("{} (in a guest)", s.description);
    s.vm = Some(VmSpec::default());
    VmDut::new(s)
}

/// The accelerator this process found, per choice: probed once.
fn accel_for(choice: AccelChoice, kernel: &Kernel) -> Result<(Accel, String), String> {
    match choice {
        AccelChoice::Tcg => Ok((Accel::Tcg, "TCG as the spec asks".into())),
        AccelChoice::Kvm => match probe_kvm(kernel) {
            (Accel::Kvm, why) => Ok((Accel::Kvm, why)),
            (_, why) => Err(format!("vm.accel = \"kvm\", but {why}")),
        },
        AccelChoice::Auto => Ok(probe_kvm(kernel)),
    }
}

/// Does a guest boot under KVM here? A tiny guest (busybox printing a line
/// and powering off) under `-accel kvm`, at most [`KVM_PROBE_LIMIT`];
/// the answer is kept for the process. (TCG, and why, when not.)
pub fn probe_kvm(kernel: &Kernel) -> (Accel, String) {
    static DONE: OnceLock<Mutex<Option<(Accel, String)>>> = OnceLock::new();
    let mut done = DONE
        .get_or_init(|| Mutex::new(None))
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(r) = done.as_ref() {
        return r.clone();
    }
    let r = probe_kvm_once(kernel);
    *done = Some(r.clone());
    r
}

fn probe_kvm_once(kernel: &Kernel) -> (Accel, String) {
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
    {
        return (Accel::Tcg, format!("KVM: /dev/kvm: {e}"));
    }
    let dir = match image_dir("kvm-probe") {
        Ok(d) => d,
        Err(e) => return (Accel::Tcg, format!("KVM probe: {e}")),
    };
    let r = (|| -> Result<(Accel, String), String> {
        let mut img = Image::default();
        img.add_program("/bin/busybox", &image::which("busybox")?)?;
        img.add(
            "/init",
            0o755,
            b"#!/bin/busybox sh\n/bin/busybox echo linerate-probe: up\n/bin/busybox poweroff -f\n"
                .to_vec(),
        );
        let initrd = dir.join("probe.cpio");
        img.write(&initrd)?;
        // `-cpu host` first (the host's CPU as it is); a model qemu cannot
        // set up under this KVM fails at once, so `max` is tried next.
        let mut tried = Vec::new();
        for cpu in ["host", "max"] {
            let mut c = qemu_command(Accel::Kvm, cpu, kernel, &initrd, 256, &[])?;
            crate::guard::die_with_parent(&mut c);
            let t = Instant::now();
            let (ended, lines) = crate::pgroup::output_bounded(&mut c, KVM_PROBE_LIMIT)
                .map_err(|e| format!("qemu: {e}"))?;
            if lines.iter().any(|l| l.contains("linerate-probe: up")) {
                let _ = KVM_CPU.set(cpu);
                return Ok((
                    Accel::Kvm,
                    format!(
                        "a probe guest (-cpu {cpu}) booted under KVM in {:.1} s",
                        t.elapsed().as_secs_f64()
                    ),
                ));
            }
            match ended {
                crate::pgroup::Ended::TimedOut => {
                    tried.push(format!(
                        "-cpu {cpu} did not boot in {} s (no nested virtualisation?)",
                        KVM_PROBE_LIMIT.as_secs()
                    ));
                    break;
                }
                crate::pgroup::Ended::Exited(s) => tried.push(format!(
                    "-cpu {cpu} ended ({s}): {}",
                    lines.iter().find(|l| l.contains("error")).map_or_else(
                        || crate::pgroup::last_line(&lines),
                        |l| l.trim().to_string()
                    )
                )),
            }
        }
        Ok((
            Accel::Tcg,
            format!("a probe guest under KVM: {}: TCG", tried.join("; ")),
        ))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    r.unwrap_or_else(|e| (Accel::Tcg, format!("KVM probe: {e}")))
}

/// The `-cpu` model a KVM guest booted with in [`probe_kvm`].
static KVM_CPU: OnceLock<&'static str> = OnceLock::new();

/// The qemu command line: `accel` with CPU model `cpu`, one vCPU, `memory` MiB, no default devices, the
/// serial console on stdio, no reboot (a panic or a power-off ends qemu),
/// and a virtio-net NIC per `(tap, MAC)`.
fn qemu_command(
    accel: Accel,
    cpu: &str,
    kernel: &Kernel,
    initrd: &Path,
    memory: u32,
    nics: &[(&str, String)],
) -> Result<std::process::Command, String> {
    let mut c = std::process::Command::new(image::which("qemu-system-x86_64")?);
    let a = accel.name();
    c.args(["-accel", a, "-cpu", cpu, "-smp", "1", "-m"])
        .arg(memory.to_string())
        .args([
            "-nodefaults",
            "-display",
            "none",
            "-no-reboot",
            "-serial",
            "stdio",
            "-monitor",
            "none",
            "-kernel",
        ])
        .arg(&kernel.image)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", "console=ttyS0 panic=-1 loglevel=4 rdinit=/init"]);
    for (i, (tap, mac)) in nics.iter().enumerate() {
        c.arg("-netdev")
            .arg(format!(
                "tap,id=n{i},ifname={tap},script=no,downscript=no,vhost=off"
            ))
            .arg("-device")
            .arg(format!(
                "virtio-net-pci,netdev=n{i},mac={mac},ctrl_vlan=off"
            ));
    }
    Ok(c)
}

/// `IMAGE_DIR/PID-TAG`, new and private (after removing those of runs
/// that are gone).
fn image_dir(tag: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let root = Path::new(IMAGE_DIR);
    let fail = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .map_err(|e| fail(root, e))?;
    if let Ok(rd) = std::fs::read_dir(root) {
        for e in rd.flatten() {
            let n = e.file_name();
            let pid = n.to_str().and_then(|n| n.split_once('-')).map(|(p, _)| p);
            if let Some(p) = pid.and_then(|p| p.parse::<u32>().ok()) {
                if p != std::process::id() && !Path::new(&format!("/proc/{p}")).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
    }
    let d = root.join(format!("{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&d)
        .map_err(|e| fail(&d, e))?;
    Ok(d)
}

/// A running guest and what joins it to the bed; dropping it removes all.
struct Guest {
    ns: String,
    qemu: Option<Group>,
    stdin: Option<std::process::ChildStdin>,
    _joins: Vec<XdpRedirectBare>,
    taps: Vec<&'static str>,
    dir: PathBuf,
    /// The watchdog's script that removes `dir` if the bench dies.
    cleanup: Option<PathBuf>,
}

impl Drop for Guest {
    fn drop(&mut self) {
        if let Some(q) = &mut self.qemu {
            q.kill();
        }
        for t in &self.taps {
            let _ = crate::testbed::run_checked(&["ip", "-n", &self.ns, "link", "del", t]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(c) = self.cleanup.take() {
            crate::guard::unregister_peer(&c, &self.ns);
            let _ = std::fs::remove_file(&c);
        }
    }
}

/// A script the watchdog runs (`SCRIPT stop NS`, [`crate::guard`]'s peer
/// protocol) if the bench dies: it removes the guest's boot files `dir`
/// (qemu is killed and the taps go with the namespace without it).
fn cleanup_script(dir: &Path, ns: &str) -> Result<PathBuf, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let scripts = Path::new("/run/linerate/dut-stop");
    std::fs::create_dir_all(scripts).map_err(|e| format!("{}: {e}", scripts.display()))?;
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let p = scripts.join(format!("{name}.vm.sh"));
    let body = format!(
        "#!/bin/sh\n# linerate bench: removes a guest's boot files if the bench dies (run by its watchdog).\n[ \"$1\" = stop ] || exit 2\nrm -f \"$0\"\nrm -rf -- {}\n",
        shell_quote(&dir.display().to_string())
    );
    // A new file (the name is this run's, PID-NS-NAME): never one that
    // is there, nor through a symlink.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o700)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&p)
        .map_err(|e| format!("{}: {e}", p.display()))?;
    if let Err(e) = f.write_all(body.as_bytes()) {
        let _ = std::fs::remove_file(&p);
        return Err(format!("{}: {e}", p.display()));
    }
    crate::guard::register_peer(&p, ns);
    Ok(p)
}

/// A DuT spec whose commands run in a guest ([`VmSpec`]).
pub struct VmDut {
    pub spec: DutSpec,
    vm: VmSpec,
    guest: Option<Guest>,
    console: Option<Log>,
    /// The accelerator, once known, and why.
    accel: Option<(Accel, String)>,
    kernel: Option<Kernel>,
}

impl VmDut {
    /// `spec` with its `[vm]` section (a spec without one runs with the
    /// defaults).
    pub fn new(spec: DutSpec) -> Self {
        let vm = spec.vm.clone().unwrap_or_default();
        VmDut {
            spec,
            vm,
            guest: None,
            console: None,
            accel: None,
            kernel: None,
        }
    }

    fn console_path(&self) -> String {
        self.console
            .as_ref()
            .map_or_else(|| "none".into(), |l| l.path.display().to_string())
    }

    /// `msg (console log PATH)`.
    fn failed(&self, msg: impl std::fmt::Display) -> DutError {
        DutError::Failed(format!("{msg} (console log {})", self.console_path()))
    }

    /// The kernel and the accelerator (found once).
    fn resolve(&mut self) -> Result<(Kernel, Accel), String> {
        if self.kernel.is_none() {
            self.kernel = Some(Kernel::find(
                self.vm.kernel.as_deref(),
                self.vm.modules.as_deref(),
            )?);
        }
        let k = self.kernel.clone().unwrap_or_else(|| unreachable!());
        if self.accel.is_none() {
            self.accel = Some(accel_for(self.vm.accel, &k)?);
        }
        Ok((k, self.accel.as_ref().map_or(Accel::Tcg, |a| a.0)))
    }

    /// The placeholders' values inside the guest.
    fn guest_values(&self, bed: &Testbed) -> Vec<(String, String)> {
        let i = bed.info();
        let mut v: Vec<(String, String)> = [
            ("ns", "guest"),
            ("d0", "eth0"),
            ("d1", "eth1"),
            ("cpu", "0"),
            ("linerate", "/bin/linerate"),
            ("peers", "/dut/peers"),
            ("spec_dir", "/dut"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
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
        v
    }

    /// The initramfs for this DuT on `bed`, written to `to`.
    fn build_image(
        &self,
        bed: &Testbed,
        env: &DutEnv,
        k: &Kernel,
        to: &Path,
    ) -> Result<(), String> {
        let mut img = Image::default();
        img.add("/init", 0o755, image::INIT.as_bytes().to_vec());
        img.add_program("/bin/busybox", &image::which("busybox")?)?;
        img.add_program("/bin/linerate", &env.linerate)?;
        img.add_program("/sbin/ip", &image::which("ip")?)?;
        img.add_program("/sbin/bridge", &image::which("bridge")?)?;
        let order = k.load_order()?;
        for m in &order {
            img.add_file(&format!("/lib/modules/{m}"), &k.modules.join(m))?;
        }
        let list: String = order.iter().map(|m| format!("{m}\n")).collect();
        img.add("/dut/modules", 0o644, list.into_bytes());
        let values = self.guest_values(bed);
        // busybox's sh runs its own applets before what PATH finds: `ip`
        // and `bridge` must be iproute2's, as on the host.
        let env_text: String = values
            .iter()
            .map(|(k, v)| format!("export {}={}\n", env_name(k), shell_quote(v)))
            .chain(["ip() { /sbin/ip \"$@\"; }\nbridge() { /sbin/bridge \"$@\"; }\n".to_string()])
            .collect();
        img.add("/dut/env", 0o644, env_text.into_bytes());
        img.add(
            "/dut/net",
            0o644,
            format!(". /dut/env\n{}", guest_net(bed)).into_bytes(),
        );
        let names: Vec<&str> = values.iter().map(|(k, _)| k.as_str()).collect();
        for (field, cmd) in [
            ("start", &self.spec.start),
            ("run", &self.spec.run),
            ("stop", &self.spec.stop),
        ] {
            if let Some(c) = cmd {
                let text = shell_expand(c, &names).map_err(|e| format!("field `{field}`: {e}"))?;
                img.add(
                    &format!("/dut/{field}"),
                    0o644,
                    format!(". /dut/env\n{text}\n").into_bytes(),
                );
            }
        }
        img.write(to)
    }

    /// Taps, XDP joins, qemu: the guest started (or an error, with
    /// everything made so far removed).
    fn launch(&mut self, bed: &Testbed, env: &DutEnv) -> Result<Guest, String> {
        let (k, accel) = self.resolve()?;
        let ns = bed.ns_dut().to_string();
        let dir = image_dir(&format!("{ns}-{}", self.spec.name.replace(':', "_")))?;
        let mut guest = Guest {
            ns: ns.clone(),
            qemu: None,
            stdin: None,
            _joins: Vec::new(),
            taps: Vec::new(),
            dir: dir.clone(),
            cleanup: None,
        };
        guest.cleanup = Some(cleanup_script(&dir, &ns)?);
        let initrd = dir.join("initrd.cpio");
        self.build_image(bed, env, &k, &initrd)?;
        let i = bed.info();
        let ports = [(&i.dut_in, "tap0"), (&i.dut_out, "tap1")];
        for (port, tap) in ports {
            crate::testbed::run_checked(&[
                "ip", "-n", &ns, "tuntap", "add", "dev", tap, "mode", "tap",
            ])?;
            guest.taps.push(tap);
            crate::testbed::run_checked(&["ip", "-n", &ns, "link", "set", "dev", tap, "up"])?;
            let name = port.name.clone();
            let j = bed
                .in_netns(&ns, || {
                    XdpRedirectBare::start(&name, tap, AttachMode::Native)
                })
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            guest._joins.push(j);
        }
        let nics: Vec<(&str, String)> =
            ports.iter().map(|(p, t)| (*t, p.mac.to_string())).collect();
        let cpu = match accel {
            Accel::Kvm => KVM_CPU.get().copied().unwrap_or("host"),
            Accel::Tcg => "max",
        };
        let q = qemu_command(accel, cpu, &k, &initrd, self.vm.memory_mib, &nics)?;
        let mut c = std::process::Command::new("ip");
        c.args(["netns", "exec", &ns])
            .arg(q.get_program())
            .args(q.get_args());
        crate::guard::die_with_parent(&mut c);
        super::device::on_cpu(&mut c, env.cpu);
        // The console log is bounded: a guest that writes more gets qemu
        // killed (SIGXFSZ), an error naming the log.
        // SAFETY: setrlimit is async-signal-safe; the struct is a copy.
        unsafe {
            use std::os::unix::process::CommandExt;
            c.pre_exec(|| {
                let l = libc::rlimit {
                    rlim_cur: CONSOLE_LIMIT,
                    rlim_max: CONSOLE_LIMIT,
                };
                libc::setrlimit(libc::RLIMIT_FSIZE, &l);
                Ok(())
            });
        }
        let log = self.console.as_ref().ok_or("no console log")?;
        let mut g =
            Group::spawn_with_stdin(&mut c, std::process::Stdio::piped(), &log.file, &log.file)
                .map_err(|e| format!("qemu: {e}"))?;
        guest.stdin = g.stdin();
        guest.qemu = Some(g);
        Ok(guest)
    }

    /// What the guest's console says went wrong: a kernel panic, the
    /// init's `fail:`, the DuT's end, or its last line.
    fn cause(&mut self) -> String {
        let lines = self.console.as_mut().map(|l| l.lines()).unwrap_or_default();
        guest_cause(&lines)
    }
}

/// What the bench reads on a guest's console (the init's
/// `linerate-guest: ` lines; anything else is the kernel's or the DuT's).
#[derive(Debug, Default)]
pub struct Console {
    /// The last JSON object the DuT's `run` printed (its account).
    pub account: Option<serde_json::Value>,
    /// Seconds from the kernel's start until the NICs were up.
    pub boot_s: Option<f64>,
    /// The exit status of the DuT's `run`, once it ended.
    pub run_ended: Option<String>,
    /// What ended the guest, in words ([`guest_cause`]).
    pub cause: String,
}

/// Read a guest's console (a hostile guest may print anything: nothing
/// here panics or trusts a line's length).
pub fn read_console(lines: &[String]) -> Console {
    let g = |l: &String| l.strip_prefix("linerate-guest: ").map(str::to_string);
    Console {
        account: lines
            .iter()
            .filter_map(g)
            .filter_map(|l| l.strip_prefix("out: ").map(String::from))
            .rev()
            .filter(|l| l.trim_start().starts_with('{'))
            .find_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
            .filter(serde_json::Value::is_object),
        boot_s: lines.iter().filter_map(g).find_map(|l| {
            l.strip_prefix("up ")
                .and_then(|s| s.trim().parse::<f64>().ok())
                .filter(|b| b.is_finite() && *b >= 0.0)
        }),
        run_ended: lines.iter().filter_map(g).rev().find_map(|l| {
            l.strip_prefix("run ended with ")
                .map(|r| r.trim().to_string())
        }),
        cause: guest_cause(lines),
    }
}

/// The longest console text an error quotes.
const CAUSE_CHARS: usize = 200;

/// `line` as an error may quote it: control characters (a lone CR, escape
/// sequences) as spaces, at most [`CAUSE_CHARS`] characters.
fn quotable(line: &str) -> String {
    let t: String = line
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(CAUSE_CHARS + 1)
        .collect();
    if t.chars().count() > CAUSE_CHARS {
        t.chars().take(CAUSE_CHARS).collect::<String>() + "..."
    } else {
        t
    }
}

/// What the console's `lines` say ended the guest, in one line: a kernel
/// panic, the init's failure, the DuT's end and its last words, or the
/// console's last line.
fn guest_cause(lines: &[String]) -> String {
    fn g(l: &str) -> Option<&str> {
        l.strip_prefix("linerate-guest: ")
    }
    if let Some(p) = lines.iter().find(|l| l.contains("Kernel panic")) {
        return format!("the guest kernel panicked: {}", quotable(p));
    }
    if let Some(f) = lines
        .iter()
        .filter_map(|l| g(l))
        .rev()
        .find_map(|l| l.strip_prefix("fail: "))
    {
        return format!("the guest's set-up failed: {}", quotable(f));
    }
    if let Some(r) = lines
        .iter()
        .filter_map(|l| g(l))
        .rfind(|l| l.starts_with("run ended"))
    {
        let out = lines
            .iter()
            .filter_map(|l| g(l))
            .filter_map(|l| l.strip_prefix("out: "))
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or_default();
        return format!("the DuT's {}: {}", quotable(r), quotable(out));
    }
    let last = crate::pgroup::last_line(lines);
    if last.is_empty() {
        "the guest printed nothing".into()
    } else {
        format!("its console's last line: {}", quotable(&last))
    }
}

/// The guest's network set-up: eth0 and eth1 as d0 and d1 (addresses,
/// static neighbours of the generator and the sink), quiet like the bed's
/// veths (no ARP, no multicast, no IPv6).
fn guest_net(bed: &Testbed) -> String {
    let i = bed.info();
    // Interfaces made later (a bridge) get no IPv6 either.
    let mut s = String::from(
        "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6\n\
         echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6\n",
    );
    for (dev, me, peer) in [("eth0", &i.dut_in, &i.gen), ("eth1", &i.dut_out, &i.sink)] {
        s.push_str(&format!(
            "echo 1 > /proc/sys/net/ipv6/conf/{dev}/disable_ipv6\n\
             ip link set dev {dev} arp off multicast off\n\
             ip addr add {}/{} dev {dev}\n\
             ip link set dev {dev} up\n\
             ip neigh replace {} lladdr {} dev {dev} nud permanent\n",
            me.ipv4, me.prefix4, peer.ipv4, peer.mac
        ));
    }
    s
}

impl Dut for VmDut {
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
        self.vm.boot_timeout
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
        // The spec's `version` runs on the host (right for `{linerate}`,
        // which the guest runs a copy of; a command that asks the host's
        // kernel answers for the host); without one the DuT is the guest's
        // kernel.
        let inner = self.spec.version.as_ref().map(|_| {
            let mut host = self.spec.clone();
            host.vm = None;
            SpecDut::new(host).version() + "; "
        });
        let inner = inner.unwrap_or_default();
        let mut me = VmDut::new(self.spec.clone());
        match me.resolve() {
            Ok((k, a)) => format!(
                "{inner}guest Linux {}, {}, {}",
                k.release,
                qemu_version(),
                accel_label(a)
            ),
            Err(e) => format!("{inner}guest: {e}"),
        }
    }
    fn start(&mut self, bed: &mut Testbed, env: &DutEnv) -> Result<(), DutError> {
        let ns = bed.ns_dut().to_string();
        let log = Log::open(
            &format!("{}-{ns}-{}.console.log", std::process::id(), self.spec.name),
            &format!(
                "console of the guest of DuT {} ({}) in namespace {ns}",
                self.spec.name,
                self.spec.origin.replace('\n', " ")
            ),
        )
        .map_err(DutError::Failed)?;
        self.console = Some(log);
        match self.launch(bed, env) {
            Ok(g) => {
                self.guest = Some(g);
                Ok(())
            }
            Err(e) => {
                if let Some(l) = &mut self.console {
                    let _ = writeln!(l.file, "linerate bench: the guest did not start: {e}");
                }
                Err(self.failed(e))
            }
        }
    }
    fn alive(&mut self) -> Result<(), DutError> {
        let Some(g) = &self.guest else {
            return Ok(());
        };
        if let Some(s) = g.qemu.as_ref().and_then(Group::exited) {
            let cause = self.cause();
            self.guest = None;
            return Err(self.failed(format!("the guest ended (qemu {s}): {cause}")));
        }
        Ok(())
    }
    fn explain(&mut self, e: DutError) -> DutError {
        match e {
            DutError::Failed(m) if self.console.is_some() && !m.contains("console log") => {
                // The guest's limit is vm.boot_timeout (ready_timeout for
                // a DuT on the host).
                let m = m.replace("(ready_timeout ", "(vm.boot_timeout ");
                let cause = self.cause();
                self.failed(format!("{m}; {cause}"))
            }
            e => e,
        }
    }
    fn stop(&mut self, _: &Testbed) -> Result<Option<serde_json::Value>, DutError> {
        let Some(mut g) = self.guest.take() else {
            return Ok(None);
        };
        let early = g.qemu.as_ref().and_then(Group::exited);
        if let Some(mut i) = g.stdin.take() {
            let _ = i.write_all(b"stop\n");
        }
        let limit = self.spec.stop_timeout + Duration::from_secs(10);
        let status = g.qemu.as_ref().and_then(|q| q.wait_for(limit));
        drop(g);
        let lines = self.console.as_mut().map(|l| l.lines()).unwrap_or_default();
        if let Some(s) = early {
            return Err(self.failed(format!(
                "the guest ended (qemu {s}) before the DuT was stopped: {}",
                guest_cause(&lines)
            )));
        }
        if status.is_none() {
            return Err(self.failed(format!(
                "the guest still ran {} s after it was told to stop: killed",
                limit.as_secs()
            )));
        }
        let c = read_console(&lines);
        if let Some(r) = &c.run_ended {
            // 0: it ended on SIGTERM by itself (linerate); 130, 143: by
            // SIGINT or SIGTERM; 137 (SIGKILL 5 s after SIGTERM) is a failure.
            if !matches!(r.as_str(), "0" | "130" | "143") {
                return Err(self.failed(format!("the DuT's run ended with {r}: {}", c.cause)));
            }
        }
        let mut acct = c.account.unwrap_or_else(|| serde_json::json!({}));
        let boot_s = c.boot_s;
        let (accel, why) = self.accel.clone().unwrap_or((Accel::Tcg, String::new()));
        acct["vm"] = serde_json::json!({
            "accel": accel.name(),
            "emulated": accel == Accel::Tcg,
            "why": why,
            "boot_s": boot_s,
            "kernel": self.kernel.as_ref().map(|k| k.release.clone()),
            "qemu": qemu_version(),
            "console_log": self.console_path(),
        });
        Ok(Some(acct))
    }
}

/// "KVM" or "TCG (emulation, not comparable with the host)".
pub fn accel_label(a: Accel) -> &'static str {
    match a {
        Accel::Kvm => "KVM",
        Accel::Tcg => "TCG (emulation, not comparable with the host)",
    }
}

/// The first line of `qemu-system-x86_64 --version` (asked once).
fn qemu_version() -> String {
    static V: OnceLock<String> = OnceLock::new();
    V.get_or_init(|| {
        let run = || -> Result<String, String> {
            let mut c = std::process::Command::new(image::which("qemu-system-x86_64")?);
            c.arg("--version");
            crate::guard::die_with_parent(&mut c);
            let (_, lines) = crate::pgroup::output_bounded(&mut c, Duration::from_secs(10))
                .map_err(|e| e.to_string())?;
            Ok(lines
                .first()
                .map(|l| l.trim().to_string())
                .unwrap_or_else(|| "qemu (version unknown)".into()))
        };
        run().unwrap_or_else(|e| format!("qemu: {e}"))
    })
    .clone()
}

/// The note on a guest DuT's row: the acceleration and the boot time.
pub fn note(account: &serde_json::Value) -> Option<String> {
    let vm = account.get("vm")?;
    let accel = match vm["accel"].as_str()? {
        "kvm" => Accel::Kvm,
        _ => Accel::Tcg,
    };
    let boot = vm["boot_s"]
        .as_f64()
        .map(|b| format!(", booted in {b:.1} s"))
        .unwrap_or_default();
    Some(format!("in a guest under {}{boot}", accel_label(accel)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cause_is_the_panic_the_failure_or_the_end() {
        let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            guest_cause(&l(&[
                "[ 1.0] x",
                "[ 2.0] Kernel panic - not syncing: sysrq triggered crash",
                "[ 2.1] end"
            ])),
            "the guest kernel panicked: [ 2.0] Kernel panic - not syncing: sysrq triggered crash"
        );
        assert_eq!(
            guest_cause(&l(&[
                "linerate-guest: fail: start exited with 1",
                "linerate-guest: power off"
            ])),
            "the guest's set-up failed: start exited with 1"
        );
        assert_eq!(
            guest_cause(&l(&[
                "linerate-guest: running",
                "linerate-guest: out: error: no such port",
                "linerate-guest: run ended with 2"
            ])),
            "the DuT's run ended with 2: error: no such port"
        );
        assert_eq!(guest_cause(&l(&[])), "the guest printed nothing");
    }

    #[test]
    fn the_note_names_the_acceleration() {
        let a = serde_json::json!({"vm": {"accel": "tcg", "boot_s": 4.25}});
        assert_eq!(
            note(&a).unwrap(),
            "in a guest under TCG (emulation, not comparable with the host), booted in 4.2 s"
        );
        assert_eq!(
            note(&serde_json::json!({"vm": {"accel": "kvm"}})).unwrap(),
            "in a guest under KVM"
        );
        assert_eq!(note(&serde_json::json!({})), None);
    }

    #[test]
    fn console_text_is_quoted_short_and_without_control_characters() {
        let long = format!("linerate-guest: fail: {}\r\x1b[31m", "x".repeat(5000));
        let c = guest_cause(&[long]);
        assert!(c.starts_with("the guest's set-up failed: xxx"), "{c}");
        assert!(c.ends_with("..."), "{c}");
        assert!(!c.chars().any(char::is_control), "{c:?}");
        assert!(c.chars().count() <= 240, "{}", c.chars().count());
    }

    #[test]
    fn a_guest_spec_may_not_name_the_hosts_directories() {
        for field in ["start", "run", "stop"] {
            let t = format!(
                "name = \"g\"\ndescription = \"d\"\nmode = \"l3\"\nrun = \"true\"\n{field} = \"{{spec_dir}}/fwd\"\n[vm]\n"
            );
            let t = if field == "run" {
                t.replacen("run = \"true\"\n", "", 1)
            } else {
                t
            };
            let e = DutSpec::parse(&t, "g.toml", Path::new("/d")).unwrap_err();
            assert!(e.starts_with(&format!("g.toml: field `{field}`: ")), "{e}");
            assert!(e.contains("{spec_dir} and {peers} are the host's"), "{e}");
        }
        // On the host they are fine.
        let t =
            "name = \"g\"\ndescription = \"d\"\nmode = \"l3\"\nrun = \"{spec_dir}/fwd {peers}\"\n";
        assert!(DutSpec::parse(t, "g.toml", Path::new("/d")).is_ok());
    }

    #[test]
    fn the_example_guest_spec_parses() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/dut-vm-afxdp.toml");
        let s = DutSpec::load(&p).unwrap();
        assert_eq!(s.vm, Some(VmSpec::default()));
    }

    #[test]
    fn bad_vm_sections_name_their_field() {
        let field = |n: &str, m: String| format!("x.toml: field `{n}`: {m}");
        let f = |t: &str| toml::from_str::<VmFile>(t).unwrap();
        let e = VmSpec::check(f("accel = \"xen\""), Path::new("/d"), &field).unwrap_err();
        assert!(e.starts_with("x.toml: field `vm.accel`: \"xen\""), "{e}");
        let e = VmSpec::check(f("memory = 64"), Path::new("/d"), &field).unwrap_err();
        assert!(e.starts_with("x.toml: field `vm.memory`: 64"), "{e}");
        let e = VmSpec::check(f("boot_timeout = 0"), Path::new("/d"), &field).unwrap_err();
        assert!(e.starts_with("x.toml: field `vm.boot_timeout`"), "{e}");
        let v = VmSpec::check(
            f("kernel = \"k/vmlinuz-1\"\naccel = \"tcg\""),
            Path::new("/d"),
            &field,
        )
        .unwrap();
        assert_eq!(v.kernel, Some(PathBuf::from("/d/k/vmlinuz-1")));
        assert_eq!(v.accel, AccelChoice::Tcg);
        assert!(toml::from_str::<VmFile>("cpus = 2").is_err());
    }
}
