//! Files of a test: a private temporary directory ([`TempDir`], made by the
//! call, mode 0700, removed with its contents on drop, also when the test
//! panics), never a predictable name in the shared /tmp (the tests run as
//! root); a tmpfs of a given size ([`Tmpfs`], unmounted on drop).
//!
//! Test-only conveniences: they panic when the directory or the mount
//! cannot be made.

use crate::need::require_root;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Make a new directory `$TMPDIR/lr-TAG-PID-RANDOM` (16 random hex digits)
/// with mode 0700; its path. It is made by this call, never one that was
/// there before (mkdir fails on anything at the path, so nothing planted
/// there, a symlink say, is ever followed).
pub fn private_dir(tag: &str) -> PathBuf {
    use std::hash::{BuildHasher, Hasher};
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    for _ in 0..16 {
        // RandomState's keys come from the OS's random source.
        let r = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let p = base.join(format!("lr-{tag}-{}-{r:016x}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&p) {
            Ok(()) => return p,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("cannot make {}: {e}", p.display()),
        }
    }
    panic!("16 random names in {} already taken", base.display())
}

/// A fresh private temporary directory ([`private_dir`]), removed with its
/// contents on drop (also when the test fails).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        TempDir(private_dir(tag))
    }
    pub fn join(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    /// Write `text` into file `name` of the directory; its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A tmpfs of `size` mounted on a directory, unmounted on drop.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn mount(dir: PathBuf, size: &str) -> Tmpfs {
        require_root();
        std::fs::create_dir_all(&dir).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .expect("mount");
        assert!(st.success(), "mount -t tmpfs on {}", dir.display());
        Tmpfs(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
