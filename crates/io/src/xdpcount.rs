//! The in-kernel sink counter (`bpf/xdp_count.c`): an XDP program that
//! counts the packets and bytes it receives in a per-CPU array and drops
//! them (or passes them to the stack). Optionally it reads the big-endian
//! u64 sequence number that [`crate::xdpgen::XdpGen`] writes and keeps the
//! largest one seen.
//!
//! Attaching it to the receiving end of a veth also activates the veth's
//! native XDP path (NAPI), which XDP_TX / XDP_REDIRECT into that veth need.
//!
//! ```no_run
//! # use linerate_io::{xdpcount::XdpCount, xdp::AttachMode};
//! let sink = XdpCount::attach("d0", AttachMode::Native, false)?;
//! // ... traffic ...
//! println!("{} packets", sink.read().packets);
//! # Ok::<(), linerate_io::PortError>(())
//! ```

use crate::port::PortError;
use crate::xdp::{AttachMode, XdpProgram};
use aya::maps::{Array, PerCpuArray};

const NO_SEQ: u32 = u32::MAX;
/// Largest sequence-number offset the program accepts (it bounds packet
/// accesses for the verifier).
pub const MAX_SEQ_OFFSET: usize = 4096;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CountCfg {
    pass: u32,
    seq_off: u32,
}
// SAFETY: plain old data, no padding.
unsafe impl aya::Pod for CountCfg {}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawCountStats {
    packets: u64,
    bytes: u64,
    max_seq: u64,
    no_seq: u64,
}
// SAFETY: plain old data, no padding.
unsafe impl aya::Pod for RawCountStats {}

/// What the sink saw, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CountStats {
    pub packets: u64,
    pub bytes: u64,
    /// Largest sequence number seen (when a sequence offset was configured
    /// and at least one frame carried one).
    pub max_seq: Option<u64>,
    /// Frames too short to hold the sequence number.
    pub no_seq: u64,
}

/// The sink counter attached to one interface; detached on drop.
pub struct XdpCount {
    prog: XdpProgram,
    what: String,
}

/// The index of `ifname` in the calling thread's network namespace.
pub(crate) fn ifindex(ifname: &str, what: &str) -> Result<u32, PortError> {
    let c = std::ffi::CString::new(ifname)
        .map_err(|_| PortError::new(format!("{what}: interface name contains a NUL byte")))?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(PortError::new(format!(
            "{what}: no interface named '{ifname}' in this network namespace"
        )));
    }
    Ok(idx)
}

pub(crate) fn map_err(what: &str, map: &str, e: impl std::fmt::Display) -> PortError {
    PortError::new(format!("{what}: BPF map '{map}': {e}"))
}

impl XdpCount {
    /// Attach the counter to `ifname` (in the calling thread's namespace):
    /// frames are dropped after counting, or passed to the stack if `pass`.
    pub fn attach(ifname: &str, mode: AttachMode, pass: bool) -> Result<XdpCount, PortError> {
        XdpCount::attach_with_seq(ifname, mode, pass, None)
    }

    /// As [`XdpCount::attach`], also reading a big-endian u64 sequence
    /// number at `seq_offset` bytes into each frame.
    pub fn attach_with_seq(
        ifname: &str,
        mode: AttachMode,
        pass: bool,
        seq_offset: Option<usize>,
    ) -> Result<XdpCount, PortError> {
        let what = format!("xdpcount on '{ifname}'");
        if let Some(off) = seq_offset {
            if off > MAX_SEQ_OFFSET {
                return Err(PortError::new(format!(
                    "{what}: sequence offset {off} is beyond the supported {MAX_SEQ_OFFSET}"
                )));
            }
        }
        let idx = ifindex(ifname, &what)?;
        let mut prog = XdpProgram::load(&crate::bpf::XDP_COUNT.0, "xdp_count", &what)?;
        {
            let map = prog
                .ebpf_mut()
                .map_mut("count_cfg")
                .ok_or_else(|| map_err(&what, "count_cfg", "missing"))?;
            let mut cfg: Array<_, CountCfg> =
                Array::try_from(map).map_err(|e| map_err(&what, "count_cfg", e))?;
            let v = CountCfg {
                pass: pass as u32,
                seq_off: seq_offset.map_or(NO_SEQ, |o| o as u32),
            };
            cfg.set(0, v, 0)
                .map_err(|e| map_err(&what, "count_cfg", e))?;
        }
        // Configured before attaching: the program never sees a zero config.
        prog.attach(idx, mode)?;
        Ok(XdpCount { prog, what })
    }

    /// The counters summed over CPUs (one map read: a syscall).
    pub fn try_read(&self) -> Result<CountStats, PortError> {
        let map = self
            .prog
            .ebpf()
            .map("count_stats")
            .ok_or_else(|| map_err(&self.what, "count_stats", "missing"))?;
        let arr: PerCpuArray<_, RawCountStats> =
            PerCpuArray::try_from(map).map_err(|e| map_err(&self.what, "count_stats", e))?;
        let per_cpu = arr
            .get(&0, 0)
            .map_err(|e| map_err(&self.what, "count_stats", e))?;
        let mut s = CountStats::default();
        let mut max_seq = 0u64;
        for v in per_cpu.iter() {
            s.packets += v.packets;
            s.bytes += v.bytes;
            s.no_seq += v.no_seq;
            max_seq = max_seq.max(v.max_seq);
        }
        s.max_seq = max_seq.checked_sub(1);
        Ok(s)
    }

    /// The counters summed over CPUs; zeros if the map cannot be read
    /// (which does not happen while the program is loaded).
    pub fn read(&self) -> CountStats {
        self.try_read().unwrap_or_default()
    }
}
