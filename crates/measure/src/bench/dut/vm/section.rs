//! The `[vm]` section of a DuT spec file ([`super`]): what the guest is
//! (kernel, memory, acceleration, boot time), parsed and checked. Apart
//! from the guest's code, so that the spec parser needs nothing of it.

use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default time from qemu's start until the guest must forward (TCG boots
/// the Debian cloud kernel in about 4 s; linerate's start under TCG takes
/// a few more).
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(60);

/// The `[vm]` section of a DuT spec file, as written.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct VmFile {
    kernel: Option<String>,
    modules: Option<String>,
    memory: Option<u32>,
    accel: Option<String>,
    boot_timeout: Option<f64>,
}

/// Which accelerator to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AccelChoice {
    /// KVM when a probe guest boots under it, else TCG.
    #[default]
    Auto,
    Kvm,
    Tcg,
}

/// The accelerator a guest runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// A checked `[vm]` section.
#[derive(Clone, Debug, PartialEq)]
pub struct VmSpec {
    /// The guest kernel (default: [`Kernel::find`]'s).
    pub kernel: Option<PathBuf>,
    /// Its modules (default: `/lib/modules/RELEASE`).
    pub modules: Option<PathBuf>,
    /// Guest memory in MiB.
    pub memory_mib: u32,
    pub accel: AccelChoice,
    pub boot_timeout: Duration,
}

impl Default for VmSpec {
    fn default() -> Self {
        VmSpec {
            kernel: None,
            modules: None,
            memory_mib: 1024,
            accel: AccelChoice::Auto,
            boot_timeout: BOOT_TIMEOUT,
        }
    }
}

impl VmSpec {
    /// Check a `[vm]` section; `field` formats an error for `vm.NAME`;
    /// relative paths are from the spec's directory.
    pub fn check(
        f: VmFile,
        dir: &Path,
        field: &dyn Fn(&str, String) -> String,
    ) -> Result<VmSpec, String> {
        let d = VmSpec::default();
        let path = |p: Option<String>| p.map(|p| dir.join(p));
        let memory_mib = match f.memory {
            None => d.memory_mib,
            Some(m) if (128..=65536).contains(&m) => m,
            Some(m) => return Err(field("vm.memory", format!("{m}: MiB, 128 to 65536"))),
        };
        let accel = match f.accel.as_deref() {
            None | Some("auto") => AccelChoice::Auto,
            Some("kvm") => AccelChoice::Kvm,
            Some("tcg") => AccelChoice::Tcg,
            Some(a) => {
                return Err(field(
                    "vm.accel",
                    format!(
                    "{a:?}: \"auto\" (KVM if a guest boots under it, else TCG), \"kvm\" or \"tcg\""
                ),
                ))
            }
        };
        let boot_timeout = match f.boot_timeout {
            None => d.boot_timeout,
            Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Duration::from_secs_f64(s),
            Some(s) => {
                return Err(field(
                    "vm.boot_timeout",
                    format!("{s}: seconds, over 0 and at most 3600"),
                ))
            }
        };
        Ok(VmSpec {
            kernel: path(f.kernel),
            modules: path(f.modules),
            memory_mib,
            accel,
            boot_timeout,
        })
    }
}
