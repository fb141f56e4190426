//! The maps of `src/xdp/switch_offload.bpf.c`, the XDP program an `afxdp:`
//! port opened with [`crate::OpenOptions::switch_offload`] runs instead of
//! `xsk_redirect`: exact flow entries (the switch's eight packet key words ->
//! what to do), their per-CPU counters, the egress ports, and the program's
//! own counters. One set per interface (each interface holds its own copy of
//! the program); the switch fills them (`linerate switch --offload xdp`,
//! crates/pipeline/src/switch/offload.rs). Map updates are syscalls: made on
//! a flow's first packets and on rule changes, never per packet.

use crate::error::PortError;
use crate::xdp::XdpProgram;
use aya::maps::{Array, CpuMap, DevMapHash, HashMap, MapData, PerCpuArray};
use aya::programs::{ProgramFd, Xdp};

/// Most exact entries (and counter slots) per port; `MAX_FLOWS` in the C.
pub const MAX_FLOWS: u32 = 65536;

/// `ACT_*` of the C: what an entry does.
pub const ACT_DROP: u32 = 1;
pub const ACT_DL_DST: u32 = 2;
pub const ACT_DL_SRC: u32 = 4;
pub const ACT_DEC_TTL: u32 = 8;
pub const ACT_NW_SRC: u32 = 16;
pub const ACT_NW_DST: u32 = 32;
pub const ACT_TP_SRC: u32 = 64;
pub const ACT_TP_DST: u32 = 128;
/// With [`ACT_DROP`]: no rule matched (a table miss; counted as such).
pub const ACT_MISS: u32 = 256;

/// An entry's action (`struct sw_act`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwAct {
    /// Its counters' index in `sw_slots`.
    pub slot: u32,
    /// `ACT_*`.
    pub flags: u32,
    /// The egress port's OpenFlow number (a key of `sw_ports`).
    pub out_port: u32,
    /// One's-complement sum of `!old + new` over the IPv4 header's changed
    /// 16-bit words (added to its checksum, RFC 1624 eqn. 3).
    pub ip_delta: u32,
    /// The same over the TCP/UDP checksum's changed words (pseudo-header included).
    pub l4_delta: u32,
    pub dl_dst: [u8; 6],
    pub dl_src: [u8; 6],
    /// Network byte order, as in the frame.
    pub nw_src: [u8; 4],
    pub nw_dst: [u8; 4],
    pub tp_src: [u8; 2],
    pub tp_dst: [u8; 2],
}
const _: () = assert!(std::mem::size_of::<SwAct>() == 44);
// SAFETY: plain old data without padding (5 * 4 + 12 + 8 + 4 = 44, align 4).
unsafe impl aya::Pod for SwAct {}

/// An entry's key: the switch key's eight packet words.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwKey(pub [u64; 8]);
// SAFETY: plain old data.
unsafe impl aya::Pod for SwKey {}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct SwCfg {
    in_port: u32,
    /// [`NO_CPU`] or the forwarding CPU.
    cpu: u32,
}

/// `NO_CPU` of the C: entries run on the receiving CPU.
const NO_CPU: u32 = u32::MAX;
/// Frames a forwarding CPU's queue holds (beyond, the kernel drops them).
const CPU_QUEUE: u32 = 2048;
// SAFETY: plain old data.
unsafe impl aya::Pod for SwCfg {}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
struct SwSlot {
    packets: u64,
    bytes: u64,
}
// SAFETY: plain old data.
unsafe impl aya::Pod for SwSlot {}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawStats {
    rx: u64,
    up: u64,
    up_ttl: u64,
    fwd: u64,
    drop_rule: u64,
    drop_miss: u64,
    drop_redirect: u64,
    to_cpu: u64,
    cpu_rx: u64,
}
const _: () = assert!(std::mem::size_of::<RawStats>() == 72);
// SAFETY: plain old data.
unsafe impl aya::Pod for RawStats {}

/// The program's counters on one port, summed over CPUs:
/// `rx == up + fwd + drop_rule + drop_miss + drop_redirect`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct OffloadStats {
    /// Frames the program saw.
    pub rx: u64,
    /// Sent up the AF_XDP socket (no entry, a frame of another shape, or
    /// an entry's dec_ttl on TTL <= 1).
    pub up: u64,
    /// Of `up`: dec_ttl on TTL <= 1.
    pub up_ttl: u64,
    /// Redirected out of a port by an entry.
    pub fwd: u64,
    /// Dropped by an entry: its rule drops.
    pub drop_rule: u64,
    /// Dropped by an entry: no rule matched (a table miss).
    pub drop_miss: u64,
    /// The entry's egress port was not in `sw_ports` (or the forwarding
    /// CPU's queue refused the frame).
    pub drop_redirect: u64,
    /// With a forwarding CPU: frames handed to it, and taken there (the
    /// difference, once traffic stops, was lost in its queue).
    pub to_cpu: u64,
    pub cpu_rx: u64,
}

impl OffloadStats {
    /// Dropped in XDP, every reason.
    pub fn dropped(&self) -> u64 {
        self.drop_rule + self.drop_miss + self.drop_redirect + self.drop_cpu_queue()
    }
    /// Handed to the forwarding CPU and not taken there: lost in its queue
    /// (or, while traffic flows, still in it).
    pub fn drop_cpu_queue(&self) -> u64 {
        self.to_cpu.saturating_sub(self.cpu_rx)
    }
    /// Handled in XDP (not sent up).
    pub fn handled(&self) -> u64 {
        self.fwd + self.dropped()
    }
    /// `rx == up + fwd + drops`.
    pub fn balanced(&self) -> bool {
        self.rx == self.up + self.handled()
    }
}

impl std::ops::AddAssign for OffloadStats {
    fn add_assign(&mut self, o: OffloadStats) {
        self.rx += o.rx;
        self.up += o.up;
        self.up_ttl += o.up_ttl;
        self.fwd += o.fwd;
        self.drop_rule += o.drop_rule;
        self.drop_miss += o.drop_miss;
        self.to_cpu += o.to_cpu;
        self.cpu_rx += o.cpu_rx;
        self.drop_redirect += o.drop_redirect;
    }
}

/// One port's offload maps (taken out of its loaded program).
pub struct OffloadMaps {
    what: String,
    in_port: u32,
    cfg: Array<MapData, SwCfg>,
    acts: Array<MapData, SwAct>,
    cpus: CpuMap<MapData>,
    /// `xdp_switch_cpu`, the forwarding CPU's program.
    cpu_prog: ProgramFd,
    flows: HashMap<MapData, SwKey, SwAct>,
    slots: PerCpuArray<MapData, SwSlot>,
    ports: DevMapHash<MapData>,
    stats: PerCpuArray<MapData, RawStats>,
}

fn err(what: &str, map: &str, e: impl std::fmt::Display) -> PortError {
    PortError::new(format!("{what}: XDP map '{map}': {e}"))
}

impl OffloadMaps {
    /// Take the maps out of a loaded `xdp_switch` program.
    pub fn take(prog: &mut XdpProgram, what: &str) -> Result<OffloadMaps, PortError> {
        let e = prog.ebpf_mut();
        let cpu_prog = {
            let p: &mut Xdp = e
                .program_mut("xdp_switch_cpu")
                .ok_or_else(|| err(what, "xdp_switch_cpu", "no such program"))?
                .try_into()
                .map_err(|e| err(what, "xdp_switch_cpu", e))?;
            p.load().map_err(|e| {
                err(
                    what,
                    "xdp_switch_cpu",
                    format!("the kernel refused it: {e}"),
                )
            })?;
            let fd = p.fd().map_err(|e| err(what, "xdp_switch_cpu", e))?;
            fd.try_clone().map_err(|e| err(what, "xdp_switch_cpu", e))?
        };
        let mut take = |name: &str| e.take_map(name).ok_or_else(|| err(what, name, "missing"));
        let cfg = take("sw_cfg")?;
        let flows = take("sw_flows")?;
        let slots = take("sw_slots")?;
        let ports = take("sw_ports")?;
        let stats = take("sw_stats")?;
        let acts = take("sw_acts")?;
        let cpus = take("sw_cpus")?;
        Ok(OffloadMaps {
            what: what.to_string(),
            in_port: 0,
            acts: Array::try_from(acts).map_err(|e| err(what, "sw_acts", e))?,
            cpus: CpuMap::try_from(cpus).map_err(|e| err(what, "sw_cpus", e))?,
            cpu_prog,
            cfg: Array::try_from(cfg).map_err(|e| err(what, "sw_cfg", e))?,
            flows: HashMap::try_from(flows).map_err(|e| err(what, "sw_flows", e))?,
            slots: PerCpuArray::try_from(slots).map_err(|e| err(what, "sw_slots", e))?,
            ports: DevMapHash::try_from(ports).map_err(|e| err(what, "sw_ports", e))?,
            stats: PerCpuArray::try_from(stats).map_err(|e| err(what, "sw_stats", e))?,
        })
    }

    /// This port's OpenFlow number (the `in_port` of the keys it builds).
    pub fn set_in_port(&mut self, no: u32) -> Result<(), PortError> {
        self.in_port = no;
        self.cfg
            .set(
                0,
                SwCfg {
                    in_port: no,
                    cpu: NO_CPU,
                },
                0,
            )
            .map_err(|e| err(&self.what, "sw_cfg", e))
    }

    /// Run the entries' forwarding (rewrites, counters, the redirect) on
    /// `cpu` (a CPUMAP entry with `xdp_switch_cpu`) instead of the CPU that
    /// received the frame; the lookup stays there. Call after
    /// [`Self::set_in_port`].
    pub fn set_cpu(&mut self, cpu: u32) -> Result<(), PortError> {
        self.cpus
            .set(cpu, CPU_QUEUE, Some(&self.cpu_prog), 0)
            .map_err(|e| err(&self.what, "sw_cpus", format!("CPU {cpu}: {e}")))?;
        self.cfg
            .set(
                0,
                SwCfg {
                    in_port: self.in_port,
                    cpu,
                },
                0,
            )
            .map_err(|e| err(&self.what, "sw_cfg", e))
    }

    /// Egress port `no` is the interface `ifindex`.
    pub fn set_port(&mut self, no: u32, ifindex: u32) -> Result<(), PortError> {
        self.ports
            .insert(no, ifindex, None, 0)
            .map_err(|e| err(&self.what, "sw_ports", e))
    }

    /// Add or replace the entry of `key`.
    pub fn insert(&mut self, key: &[u64; 8], act: &SwAct) -> Result<(), PortError> {
        // The action by slot first: a frame that finds the entry may look
        // it up there (on the forwarding CPU).
        self.acts
            .set(act.slot, *act, 0)
            .map_err(|e| err(&self.what, "sw_acts", e))?;
        self.flows
            .insert(SwKey(*key), *act, 0)
            .map_err(|e| err(&self.what, "sw_flows", e))
    }

    /// Remove the entry of `key` (true if there was one).
    pub fn remove(&mut self, key: &[u64; 8]) -> bool {
        self.flows.remove(&SwKey(*key)).is_ok()
    }

    /// Is there an entry for `key`?
    pub fn contains(&self, key: &[u64; 8]) -> bool {
        self.flows.get(&SwKey(*key), 0).is_ok()
    }

    /// Counter slot `slot`: (packets, bytes) summed over CPUs.
    pub fn slot(&self, slot: u32) -> Result<(u64, u64), PortError> {
        let v = self
            .slots
            .get(&slot, 0)
            .map_err(|e| err(&self.what, "sw_slots", e))?;
        Ok(v.iter()
            .fold((0, 0), |(p, b), s| (p + s.packets, b + s.bytes)))
    }

    /// The program's counters summed over CPUs.
    pub fn stats(&self) -> Result<OffloadStats, PortError> {
        let v = self
            .stats
            .get(&0, 0)
            .map_err(|e| err(&self.what, "sw_stats", e))?;
        let mut s = OffloadStats::default();
        for c in v.iter() {
            s += OffloadStats {
                rx: c.rx,
                up: c.up,
                up_ttl: c.up_ttl,
                fwd: c.fwd,
                drop_rule: c.drop_rule,
                drop_miss: c.drop_miss,
                to_cpu: c.to_cpu,
                cpu_rx: c.cpu_rx,
                drop_redirect: c.drop_redirect,
            };
        }
        Ok(s)
    }
}
