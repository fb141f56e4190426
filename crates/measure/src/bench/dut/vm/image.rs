//! The guest's boot files, built from what the host has installed (no
//! image download): the kernel (Debian's `linux-image-cloud-amd64`, which
//! `scripts/setup.sh` unpacks into [`GUEST_ROOT`]), and an
//! initramfs written here as a cpio archive ("newc", the format the kernel
//! unpacks) holding busybox (`busybox-static`), the kernel modules the
//! guest needs (virtio-net, the bridge) in load order, the `linerate`
//! binary with its shared libraries (its XDP programs are inside it),
//! iproute2's `ip` and `bridge` (so a DuT spec's commands run in the guest
//! as on the host), the init script ([`INIT`]) and the DuT's own scripts.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The guest's init: brings up the NICs, runs the DuT, and powers off when
/// told to stop on the serial console or when the DuT ends.
pub const INIT: &str = include_str!("init.sh");

/// The modules the guest loads (with what they depend on), when the kernel
/// has them as modules: the two NICs and the bridge (for `linux-bridge`).
const MODULES: &[&str] = &["virtio_pci", "virtio_net", "bridge"];

/// Where `scripts/setup.sh` unpacks the guest's kernel and modules
/// (`boot/`, `lib/modules/`): not installed on the host, where a cloud
/// kernel in /boot could become the machine's default boot entry.
pub const GUEST_ROOT: &str = "/opt/linerate/guest";

/// The newest `vmlinuz-*` in `dir` whose name passes `want`.
fn newest_in(dir: &Path, want: impl Fn(&str) -> bool) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-") && want(n))
        })
        .max_by_key(|p| version_key(&p.to_string_lossy()))
}

/// The default guest kernel ([`Kernel::find`]).
fn default_kernel() -> Option<PathBuf> {
    newest_in(&Path::new(GUEST_ROOT).join("boot"), |_| true)
        .or_else(|| newest_in(Path::new("/boot"), |n| n.ends_with("-cloud-amd64")))
        .or_else(|| newest_in(Path::new("/boot"), |_| true))
}

/// A guest kernel and its modules.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub image: PathBuf,
    /// Its release (`6.1.0-57-cloud-amd64`).
    pub release: String,
    /// Its modules (`.../lib/modules/RELEASE`).
    pub modules: PathBuf,
}

/// The numbers in a release string, for ordering (`6.1.0-57` < `6.1.0-60`).
fn version_key(s: &str) -> Vec<u64> {
    s.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

impl Kernel {
    /// `kernel` (its release is what follows `vmlinuz-` in its name), or the
    /// newest `GUEST_ROOT/boot/vmlinuz-*`, else the newest
    /// `/boot/vmlinuz-*-cloud-amd64`, else the newest `/boot/vmlinuz-*`; its
    /// modules in `modules`, or `lib/modules/RELEASE` beside its `boot/`.
    pub fn find(kernel: Option<&Path>, modules: Option<&Path>) -> Result<Kernel, String> {
        let image = match kernel {
            Some(k) => k.to_path_buf(),
            None => default_kernel().ok_or(format!(
                "no guest kernel: nothing in {GUEST_ROOT}/boot or /boot (scripts/setup.sh unpacks Debian's linux-image-cloud-amd64 there)"
            ))?,
        };
        if let Err(e) = std::fs::File::open(&image) {
            return Err(format!("kernel {}: {e}", image.display()));
        }
        let release = image
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("vmlinuz-"))
            .unwrap_or_default()
            .to_string();
        let modules = match modules {
            Some(m) => m.to_path_buf(),
            None if release.is_empty() => {
                return Err(format!(
                    "kernel {}: its release is not in its name (vmlinuz-RELEASE): give `modules`",
                    image.display()
                ))
            }
            None => image
                .parent()
                .and_then(Path::parent)
                .unwrap_or(Path::new("/"))
                .join("lib/modules")
                .join(&release),
        };
        if !modules.join("modules.dep").is_file() {
            return Err(format!(
                "modules {}: no modules.dep there (the guest kernel's modules)",
                modules.display()
            ));
        }
        Ok(Kernel {
            image,
            release,
            modules,
        })
    }

    /// The module files (relative to [`Kernel::modules`]) to load for
    /// [`MODULES`], each after those it depends on; built-in ones need no
    /// file. A module neither built in nor there is an error, except the
    /// bridge (only `linux-bridge` needs it).
    pub fn load_order(&self) -> Result<Vec<String>, String> {
        let read = |f: &str| {
            std::fs::read_to_string(self.modules.join(f))
                .map_err(|e| format!("{}: {e}", self.modules.join(f).display()))
        };
        let dep = read("modules.dep")?;
        let builtin = read("modules.builtin").unwrap_or_default();
        let name_of = |p: &str| -> String {
            let f = p.rsplit('/').next().unwrap_or(p);
            f.split(".ko").next().unwrap_or(f).replace('-', "_")
        };
        let mut deps: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
        for l in dep.lines() {
            let Some((m, d)) = l.split_once(':') else {
                continue;
            };
            deps.insert(
                name_of(m),
                (
                    m.to_string(),
                    d.split_whitespace().map(String::from).collect(),
                ),
            );
        }
        let built_in: BTreeSet<String> = builtin.lines().map(name_of).collect();
        let mut order = Vec::new();
        let mut seen = BTreeSet::new();
        fn visit(
            file: &str,
            deps: &BTreeMap<String, (String, Vec<String>)>,
            name_of: &dyn Fn(&str) -> String,
            seen: &mut BTreeSet<String>,
            order: &mut Vec<String>,
        ) {
            if !seen.insert(file.to_string()) {
                return;
            }
            if let Some((_, ds)) = deps.get(&name_of(file)) {
                for d in ds {
                    visit(d, deps, name_of, seen, order);
                }
            }
            order.push(file.to_string());
        }
        for m in MODULES {
            match deps.get(*m) {
                Some((file, _)) => visit(file, &deps, &name_of, &mut seen, &mut order),
                None if built_in.contains(*m) || *m == "bridge" => {}
                None => {
                    return Err(format!(
                        "modules {}: no {m} (the guest needs it, built in or as a module)",
                        self.modules.display()
                    ))
                }
            }
        }
        if let Some(z) = order
            .iter()
            .find(|f| !f.ends_with(".ko"))
            .map(|f| self.modules.join(f))
        {
            return Err(format!(
                "module {}: compressed; the guest's busybox loads plain .ko files only",
                z.display()
            ));
        }
        Ok(order)
    }
}

/// What goes into the initramfs: files by their path in the guest.
#[derive(Default)]
pub struct Image {
    /// Guest path -> (mode, contents).
    files: BTreeMap<String, (u32, Vec<u8>)>,
}

impl Image {
    /// `data` at `path` (absolute, in the guest) with permission bits `mode`.
    pub fn add(&mut self, path: &str, mode: u32, data: Vec<u8>) {
        self.files.insert(path.to_string(), (mode, data));
    }

    /// The host file `from` at `path` in the guest, executable.
    pub fn add_file(&mut self, path: &str, from: &Path) -> Result<(), String> {
        let data = std::fs::read(from).map_err(|e| format!("{}: {e}", from.display()))?;
        self.add(path, 0o755, data);
        Ok(())
    }

    /// The host executable `exe` at `path`, with the shared libraries it
    /// needs at their host paths (from `ldd`, bounded in time).
    pub fn add_program(&mut self, path: &str, exe: &Path) -> Result<(), String> {
        self.add_file(path, exe)?;
        for lib in shared_libraries(exe)? {
            let p = lib.display().to_string();
            if !self.files.contains_key(&p) {
                self.add_file(&p, &lib)?;
            }
        }
        Ok(())
    }

    /// Write the archive (newc) to `to`, a new file (never through a
    /// symlink, never over one that is there).
    pub fn write(&self, to: &Path) -> Result<(), String> {
        use std::os::unix::fs::OpenOptionsExt;
        let fail = |e: std::io::Error| format!("initramfs {}: {e}", to.display());
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(to)
            .map_err(fail)?;
        let mut w = std::io::BufWriter::new(f);
        let mut ino = 1u32;
        // Every directory on the way to a file, and the mount points.
        let mut dirs: BTreeSet<String> = [
            "/dev", "/proc", "/sys", "/run", "/tmp", "/bin", "/sbin", "/dut",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for p in self.files.keys() {
            let mut d = Path::new(p).parent();
            while let Some(x) = d.filter(|x| *x != Path::new("/")) {
                dirs.insert(x.display().to_string());
                d = x.parent();
            }
        }
        for d in &dirs {
            cpio_entry(&mut w, &mut ino, d, 0o040755, 0, &[]).map_err(fail)?;
        }
        // The console before devtmpfs is mounted: init's stdin and stdout.
        cpio_entry(
            &mut w,
            &mut ino,
            "/dev/console",
            0o020600,
            (5 << 8) | 1,
            &[],
        )
        .map_err(fail)?;
        for (p, (mode, data)) in &self.files {
            cpio_entry(&mut w, &mut ino, p, 0o100000 | mode, 0, data).map_err(fail)?;
        }
        cpio_entry(&mut w, &mut ino, "TRAILER!!!", 0, 0, &[]).map_err(fail)?;
        w.flush().map_err(fail)?;
        Ok(())
    }
}

/// One newc record: a 110-byte header of hex fields, the name (NUL
/// ended), the data, each padded to 4 bytes. `rdev`: major << 8 | minor.
fn cpio_entry(
    w: &mut impl Write,
    ino: &mut u32,
    path: &str,
    mode: u32,
    rdev: u32,
    data: &[u8],
) -> std::io::Result<()> {
    let name = path.trim_start_matches('/');
    let nlink = if mode & 0o170000 == 0o040000 { 2 } else { 1 };
    let header = format!(
        "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
        *ino,
        mode,
        0,
        0,
        nlink,
        0,
        data.len(),
        0,
        0,
        rdev >> 8,
        rdev & 0xff,
        name.len() + 1,
        0
    );
    *ino += 1;
    w.write_all(header.as_bytes())?;
    w.write_all(name.as_bytes())?;
    w.write_all(&[0])?;
    let pad = |n: usize| (4 - n % 4) % 4;
    w.write_all(&[0; 3][..pad(110 + name.len() + 1)])?;
    w.write_all(data)?;
    w.write_all(&[0; 3][..pad(data.len())])
}

/// The shared libraries `exe` needs (with the dynamic loader), as `ldd`
/// lists them; none for a static one.
fn shared_libraries(exe: &Path) -> Result<Vec<PathBuf>, String> {
    let mut c = std::process::Command::new("ldd");
    c.arg(exe);
    crate::guard::die_with_parent(&mut c);
    let (ended, lines) = crate::pgroup::output_bounded(&mut c, Duration::from_secs(10))
        .map_err(|e| format!("ldd {}: {e}", exe.display()))?;
    let text = lines.join("\n");
    match ended {
        crate::pgroup::Ended::Exited(_) if text.contains("not a dynamic executable") => {
            return Ok(Vec::new())
        }
        crate::pgroup::Ended::Exited(s) if s.success() => {}
        _ => return Err(format!("ldd {}: {}", exe.display(), text.trim())),
    }
    Ok(parse_ldd(&text))
}

/// The absolute paths in `ldd`'s output (`lib => /path (0x..)`,
/// `/lib64/ld-linux-x86-64.so.2 (0x..)`); `linux-vdso` has none.
fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let l = l.split_once("=>").map_or(l, |(_, r)| r).trim();
            let p = l.split_whitespace().next()?;
            p.starts_with('/').then(|| PathBuf::from(p))
        })
        .collect()
}

/// `name` found in the usual program directories.
pub fn which(name: &str) -> Result<PathBuf, String> {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{name} not found (scripts/setup.sh installs it)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_lines_give_their_paths() {
        let t = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x7f)\n\t/lib64/ld-linux-x86-64.so.2 (0x7f)\n";
        assert_eq!(
            parse_ldd(t),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2")
            ]
        );
    }

    #[test]
    fn releases_order_by_their_numbers() {
        assert!(
            version_key("vmlinuz-6.1.0-9-cloud-amd64")
                < version_key("vmlinuz-6.1.0-57-cloud-amd64")
        );
    }

    /// The archive is what `cpio` itself reads back: names, modes, device
    /// numbers and contents.
    #[test]
    fn the_archive_reads_back_with_cpio() {
        let dir = std::env::temp_dir().join(format!("lr-cpio-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let mut img = Image::default();
        img.add("/init", 0o755, b"#!/bin/sh\n".to_vec());
        img.add("/lib/x/y.so", 0o644, vec![7u8; 5]);
        let a = dir.join("a.cpio");
        img.write(&a).unwrap();
        assert!(img.write(&a).is_err(), "written over an existing file");
        let out = std::process::Command::new("cpio")
            .args(["-itv", "--quiet", "-F"])
            .arg(&a)
            .output()
            .expect("cpio (scripts/setup.sh installs it)");
        let list = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{list}");
        for want in [
            "-rwxr-xr-x",
            " init\n",
            " lib/x/y.so\n",
            "crw-------",
            "5,   1",
            " dev/console\n",
            " lib/x\n",
        ] {
            assert!(list.contains(want), "{want:?} not in\n{list}");
        }
        let x = std::process::Command::new("cpio")
            .args(["-id", "--quiet", "-F", "a.cpio", "lib/x/y.so", "init"])
            .current_dir(&dir)
            .status()
            .unwrap();
        assert!(x.success());
        assert_eq!(std::fs::read(dir.join("lib/x/y.so")).unwrap(), vec![7u8; 5]);
        assert_eq!(std::fs::read(dir.join("init")).unwrap(), b"#!/bin/sh\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
