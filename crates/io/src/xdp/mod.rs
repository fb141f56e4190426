//! Loading and attaching linerate's XDP programs (with aya).
//!
//! Programs are attached through a BPF link (kernel >= 5.9), so the kernel
//! detaches them when the link's file descriptor is closed: on drop of
//! [`XdpProgram`], on error paths, on SIGINT/SIGTERM (the CLI turns them
//! into an orderly exit) and even when the process is killed. On kernels
//! without XDP links aya falls back to netlink and detaches on drop.

pub mod count;
pub mod fwd;
pub mod generator;
pub mod objects;
pub mod switch_offload;

use crate::error::PortError;
use aya::programs::{Xdp, XdpMode};
use aya::Ebpf;

/// Where an XDP program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachMode {
    /// In the driver (veth has native XDP).
    Native,
    /// Generic (skb) XDP: works everywhere, slower.
    Generic,
}

impl AttachMode {
    pub fn parse(s: &str) -> Option<AttachMode> {
        match s {
            "native" | "drv" => Some(AttachMode::Native),
            "generic" | "skb" => Some(AttachMode::Generic),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            AttachMode::Native => "native",
            AttachMode::Generic => "generic",
        }
    }
    fn aya(self) -> XdpMode {
        match self {
            AttachMode::Native => XdpMode::Driver,
            AttachMode::Generic => XdpMode::Skb,
        }
    }
}

/// A loaded BPF object with (optionally) one XDP program attached per
/// interface. Dropping it detaches and unloads everything.
pub struct XdpProgram {
    ebpf: Ebpf,
    prog: String,
    what: String,
}

impl XdpProgram {
    /// Load an ELF object (see [`crate::xdp::objects`]) without attaching anything yet.
    pub fn load(object: &[u8], prog: &str, what: &str) -> Result<XdpProgram, PortError> {
        let mut ebpf = Ebpf::load(object)
            .map_err(|e| PortError::new(format!("{what}: loading the BPF object failed: {e}")))?;
        let p: &mut Xdp = ebpf
            .program_mut(prog)
            .ok_or_else(|| PortError::new(format!("{what}: BPF object has no program '{prog}'")))?
            .try_into()
            .map_err(|e| PortError::new(format!("{what}: '{prog}' is not an XDP program: {e}")))?;
        p.load().map_err(|e| {
            PortError::new(format!(
                "{what}: the kernel refused XDP program '{prog}': {e}"
            ))
        })?;
        Ok(XdpProgram {
            ebpf,
            prog: prog.to_string(),
            what: what.to_string(),
        })
    }

    /// Attach to an interface (by index) in the given mode.
    pub fn attach(&mut self, ifindex: u32, mode: AttachMode) -> Result<(), PortError> {
        let what = self.what.clone();
        let p: &mut Xdp = self
            .ebpf
            .program_mut(&self.prog)
            .expect("checked at load")
            .try_into()
            .expect("checked at load");
        p.attach_to_if_index(ifindex, mode.aya()).map_err(|e| {
            let hint = if format!("{e:?}").contains("EBUSY") || format!("{e:?}").contains("16") {
                " (another XDP program is attached; remove it with `ip link set dev IF xdp off`)"
            } else {
                ""
            };
            PortError::new(format!(
                "{what}: attaching XDP in {} mode to ifindex {ifindex} failed: {e}{hint}",
                mode.name()
            ))
        })?;
        Ok(())
    }

    /// The aya object, for map access.
    pub fn ebpf_mut(&mut self) -> &mut Ebpf {
        &mut self.ebpf
    }
    pub fn ebpf(&self) -> &Ebpf {
        &self.ebpf
    }
}
