//! The high-rate in-kernel generator: `src/xdp/generator.bpf.c` run with
//! `BPF_PROG_RUN` and `BPF_F_TEST_XDP_LIVE_FRAMES` (Linux >= 5.18, the
//! method of xdp-trafficgen). The kernel builds frames from a template in a
//! page pool, runs the program on each and, as the program returns
//! `XDP_TX`, transmits the frame out of the interface given as the
//! context's `ingress_ifindex` (through `ndo_xdp_xmit`, in batches).
//!
//! Things measured on veth (kernel 6.18):
//! - one syscall runs `repeat` frames; each call pays an RCU
//!   synchronisation, so below ~4M frames per call the rate is capped near
//!   2 Mpps. Runs at top speed make calls of [`CHUNK`] frames; the stop
//!   flag is therefore checked about every 0.4 s at 10 Mpps.
//! - the receiving veth (the peer of the interface we send from) must run
//!   NAPI: attach an XDP program to it ([`crate::xdp::count::XdpCount`] or
//!   [`crate::xdp::objects::XDP_PASS`]) or turn GRO on (`ethtool -K PEER gro on`),
//!   otherwise every frame is freed and no counter shows it.
//! - frames are reused from the page pool as the program left them, so the
//!   program rewrites every per-packet field on every run: the first 64
//!   header bytes, the UDP source port (`flows`) and the signature.
//!
//! Signature ([`GenConfig::signature`], format in
//! [`linerate_wire::signature`]): sampled packets (sequence number a
//! multiple of `sample_every`) get magic, stream, `FLAG_TS`, sequence
//! number and `tx_ns = bpf_ktime_get_ns()` (CLOCK_MONOTONIC), read as the
//! program's last action before `XDP_TX`; the others 24 zero bytes.
//! Sequence numbers count every packet over the generator's life. IPv4
//! UDP: the UDP checksum is set to 0; IPv6 UDP is refused.
//!
//! What "sent" means: the number of program runs that returned `XDP_TX`
//! (read from the program's per-CPU counter, so it is exact even when a
//! call is interrupted by a signal). A frame the driver then refuses (peer
//! ring full) is lost after that point; for veth it is counted in
//! `ethtool -S` as `tx_queue_N_xdp_xmit_errors` (see [`crate::xdp::fwd::veth_xdp_xmit_errors`]).
//!
//! This module is the program, its maps and the call; running it (the
//! unpaced and paced loops, the lanes, their waits) is the pipeline
//! layer's `linerate_pipeline::generate::xdp`, whose `send(gen, n)` and
//! `send_for(gen, d)` the text below calls `run(n)` and `run_for(d)`.
//!
//! Rate limiting ([`GenConfig::pps`]), two modes ([`GenConfig::pacing`]):
//!
//! - [`Pacing::InProgram`] (default): the program keeps the schedule in
//!   its `gen_pace` map (frame n due at start + n / pps, interval in
//!   1/65536 ns so no drift). A run before the next frame is due returns
//!   XDP_DROP and sends nothing ([`GenStats::idle_runs`]); a due frame is
//!   claimed with a compare-and-swap on the sent counter, so the count is
//!   exact even when two calls overlap. Every call also costs ~24 ms of
//!   RCU synchronisation after its last run, so two threads ("lanes") take
//!   turns (`LANE_CALL`, `LANE_OVERLAP`) and the program always runs.
//!   Frames leave one by one instead of in bursts; the price is CPU: one
//!   core spins at any rate (two during the overlaps). `run(n)` sends
//!   exactly n; `run_for(d)` sends floor(pps * d) (frames due before the end
//!   still leave up to `END_GRACE` after it, none later). A frame the
//!   program could not send on time (thread preempted) leaves as soon as
//!   it runs again (a catch-up burst), which keeps the long-run rate;
//!   with [`XdpGen::set_max_lag`] the schedule slips instead (a gap in the
//!   stream, no burst: for latency trials).
//!   Measured (kernel 6.18, 2 busy vCPUs, veth, 1 s of 1 ms receiver
//!   samples): rate error -0.8 to -2.3 % over wall time at 10 kpps..4 Mpps
//!   (count exact; the error is the start and the last call's end), CV of
//!   the per-ms rate 0.5 to 2.1 against 2.0 to 5.3 for slices (noisy: the
//!   machine was loaded by other builds and the sampler itself starved).
//! - [`Pacing::Slices`]: time slices (`slice_for`, 1 to 10 ms) on an
//!   absolute schedule; each slice's due frames go out in one call, then
//!   the thread sleeps and spins (`SPIN`) to the deadline. With the
//!   ~24 ms cost per call a paced run makes one call per ~25 ms: slices
//!   missed during a call are skipped and their frames sent by the next
//!   call. The long-run count is exact (`run(n)` sends n; `run_for(d)`
//!   sends floor(pps * d), its end overrun by one call's overhead: over
//!   the real duration of 3 s runs the rate reads 0.7 to 1.8 % low for
//!   10 kpps..1 Mpps) up to ~2 Mpps on this machine, but the traffic is
//!   bursts of pps * 25 ms frames, not a smooth stream; above ~40 % of the
//!   unpaced maximum the bursts no longer fit and the rate falls short.

use crate::error::PortError;
use crate::xdp::count::{ifindex, map_err};
use crate::xdp::XdpProgram;
use aya::maps::{Array, PerCpuArray};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

/// Frames per `BPF_PROG_RUN` call at full speed (4M: the per-call RCU
/// synchronisation is then negligible).
pub const CHUNK: u32 = 1 << 22;
/// Largest frame the live-frames mode accepts on 4 KiB pages (page minus
/// XDP headroom and `skb_shared_info`).
pub const MAX_FRAME: usize = 3520;
/// Offset of the payload in an untagged IPv4/UDP frame (14 + 20 + 8).
pub const IPV4_UDP_PAYLOAD: usize = 42;
const SIG_LEN: usize = linerate_wire::signature::LEN;
use crate::xdp::count::TAG_LEN;

const NO_SIG: u32 = u32::MAX;
/// Header bytes the program writes back into every frame before sending it
/// (a DuT that forwards in place, such as Linux IP forwarding on veth,
/// rewrites MACs and TTL in the shared page-pool frame).
const HDR_RESTORE: usize = 64;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
/// The kernel's TEST_XDP_MAX_BATCH.
const MAX_BATCH: u32 = 256;
/// The kernel's batch size when none is given (NAPI_POLL_WEIGHT).
const KERNEL_BATCH: u32 = 64;

/// The measurement signature ([`linerate_wire::signature`]) the program
/// writes into every frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SigConfig {
    /// Offset of the 24-byte signature in the frame (the start of the L4
    /// payload, e.g. [`IPV4_UDP_PAYLOAD`]).
    pub offset: usize,
    /// Stream id written into the signature.
    pub stream: u16,
    /// Write a full signature (magic, stream, `FLAG_TS`, sequence number,
    /// TX time) on packets whose sequence number is a multiple of this
    /// (0 and 1: every packet); the others carry 24 zero bytes.
    pub sample_every: u32,
}

/// What the generator varies per frame, and how fast it sends.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GenConfig {
    /// Above 1: the UDP source port takes `flows` consecutive values starting at
    /// the template's (IPv4 UDP only; the UDP checksum is set to 0).
    pub flows: u32,
    /// Write linerate's measurement signature. Sequence numbers count every
    /// packet (0, 1, 2, ... over the life of the generator), sampled or not.
    /// For IPv4 UDP the checksum is set to 0; IPv6 UDP frames are refused
    /// (their checksum is mandatory and not recomputed).
    pub signature: Option<SigConfig>,
    /// Frames per kernel batch (0: the kernel's default, 64; at most 256).
    pub batch_size: u32,
    /// Rate limit in frames per second (None: as fast as possible). See the
    /// module documentation for how it is paced and its usable range.
    pub pps: Option<f64>,
    /// How a rate limit is applied (ignored without `pps`).
    pub pacing: Pacing,
    /// Write the bare TX time (a big-endian u64, `bpf_ktime_get_ns`, the
    /// last thing before XDP_TX) into the frame: for latency in frames too
    /// short for the signature (a 64-byte IPv4 UDP frame has 18 payload
    /// bytes). Read by [`crate::xdp::count::XdpCount::attach_latency`].
    pub timestamp: Option<TsConfig>,
    /// Write the 18-byte tag on every frame (magic, stream, a 48-bit
    /// sequence number counted from 0 by [`XdpGen::set_stream`], TX time):
    /// what [`crate::xdp::count::XdpCount::attach_verified`] verifies. Fits
    /// the 18 payload bytes of a 64-byte IPv4 UDP frame.
    pub tag: Option<TagConfig>,
    /// A mix of frame lengths (bytes without FCS) repeating in this order,
    /// frame n taking entry n % len by the tag's sequence number (an
    /// IMIX, [`IMIX_CSIT`]): the template is cut to each length (it must be
    /// the longest; IPv4 UDP; at most [`MIX_MAX`] entries of at most
    /// [`MIX_CLASSES`] distinct lengths, each at least 60 bytes). Needs
    /// the tag (not the signature or the bare TX time).
    pub mix: Option<&'static [u16]>,
}

/// Most entries of a [`GenConfig::mix`] pattern.
pub const MIX_MAX: usize = 16;
/// Most distinct lengths in a [`GenConfig::mix`].
pub const MIX_CLASSES: usize = 4;

/// FD.io CSIT's IPv4 IMIX: 64, 570 and 1518-byte frames (with FCS) in the
/// ratio 7:4:1, interleaved over 12 frames (lengths here without FCS).
pub const IMIX_CSIT: [u16; 12] = [60, 60, 566, 60, 566, 60, 1514, 60, 566, 60, 566, 60];

/// Where the tag goes ([`GenConfig::tag`]) and how often it carries a TX time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TagConfig {
    /// Offset of the tag in the frame (e.g. [`IPV4_UDP_PAYLOAD`]).
    pub offset: usize,
    /// TX time on frames whose sequence number is a multiple of this (0
    /// and 1: every frame); the others carry 0 there.
    pub every: u32,
}

/// Where and how often [`GenConfig::timestamp`] writes the TX time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TsConfig {
    /// Offset of the 8-byte time in the frame (e.g. [`IPV4_UDP_PAYLOAD`]).
    pub offset: usize,
    /// On every n-th frame (0 and 1: every frame); the others carry 0.
    pub every: u32,
}

/// How [`GenConfig::pps`] is applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pacing {
    /// The program keeps the schedule: a run before the next frame is due
    /// returns XDP_DROP (nothing sent, counted in
    /// [`GenStats::idle_runs`]); frames leave one by one, evenly spaced,
    /// except across the gap between two calls (see the module docs).
    #[default]
    InProgram,
    /// Time slices: each slice's frames go out as one call's burst (one
    /// call per ~25 ms, see the module docs).
    Slices,
}

/// The result of one run of the generator (`linerate_pipeline::generate::xdp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct GenStats {
    /// Frames handed to XDP_TX.
    pub sent: u64,
    /// Wall time of the run.
    pub duration_ns: u64,
    /// BPF_PROG_RUN calls made.
    pub syscalls: u64,
    /// Calls cut short by a signal (their frames are still counted).
    pub interrupted: u64,
    /// Rate-limited runs: time slices scheduled ([`Pacing::Slices`]).
    pub slices: u64,
    /// [`Pacing::InProgram`]: program runs that sent nothing (the next
    /// frame was not due yet, or the run was over).
    pub idle_runs: u64,
    /// Rate-limited runs: how late each slice's first call started
    /// relative to its schedule, summed (divide by `slices` for the mean)
    /// and the largest.
    pub late_sum_ns: u64,
    pub late_max_ns: u64,
    /// [`Pacing::InProgram`] with [`XdpGen::set_max_lag`]: how long the
    /// schedule slipped in all instead of catching up (the stream's gaps),
    /// and how many times.
    pub slipped_ns: u64,
    pub slips: u64,
    /// The time the frames took to leave, from the program's own stamps
    /// (every 64th frame): without the ~35 ms of set-up and teardown of
    /// each BPF_PROG_RUN call in which nothing leaves (unpaced runs: the
    /// sum of every call's own span, so `send_pps` is the top speed while
    /// sending; paced runs: first to last frame, the schedule's time).
    /// 0: too few frames.
    pub send_ns: u64,
    /// When the run's frames left, as the program stamped them
    /// (`bpf_ktime_get_ns`, CLOCK_MONOTONIC): the first and the last
    /// stamp of the run over every CPU and call (a CPU stamps every 64th
    /// frame it sends, so each end lies up to 63 frames inside the run's).
    /// Unlike [`GenStats::send_ns`] the span between them holds the gaps
    /// between an unpaced run's calls. One clock for every generator on
    /// the machine: two runs at once (the bench both ways) share a span
    /// from the earlier first to the later last stamp. 0: nothing stamped.
    /// Not in the JSON (a clock reading of this boot).
    #[serde(skip)]
    pub first_ns: u64,
    #[serde(skip)]
    pub last_ns: u64,
    /// CPU time of the calling thread during the run (the generator's
    /// cost, plus whatever softirq work the kernel ran in its context, e.g.
    /// a veth receiver's NAPI on the same CPU). On a loaded machine
    /// `sent / cpu_ns` is the rate an idle core would reach.
    pub cpu_ns: u64,
}

impl GenStats {
    /// Frames per second of wall time.
    pub fn pps(&self) -> f64 {
        if self.duration_ns == 0 {
            0.0
        } else {
            self.sent as f64 * 1e9 / self.duration_ns as f64
        }
    }
    /// Frames per second while they were leaving ([`GenStats::send_ns`]),
    /// or of wall time when that is unknown.
    pub fn send_pps(&self) -> f64 {
        if self.send_ns == 0 {
            self.pps()
        } else {
            self.sent as f64 * 1e9 / self.send_ns as f64
        }
    }
    /// Frames per second of the thread's CPU time.
    pub fn pps_per_cpu(&self) -> f64 {
        if self.cpu_ns == 0 {
            0.0
        } else {
            self.sent as f64 * 1e9 / self.cpu_ns as f64
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawGenCfg {
    flows: u32,
    port_off: u32,
    base_port: u32,
    sig_off: u32,
    /// Bytes of `hdr` restored at the start of every frame (multiple of 8).
    hdr_len: u32,
    sample_every: u32,
    stream: u32,
    ts_off: u32,
    ts_every: u32,
    tag_off: u32,
    tag_every: u32,
    mix_n: u32,
    hdr: [u64; HDR_RESTORE / 8],
    mix_class: [u8; MIX_MAX],
    mix_len: [u32; MIX_CLASSES],
    mix_hdr_len: [u32; MIX_CLASSES],
    mix_hdr: [[u64; HDR_RESTORE / 8]; MIX_CLASSES],
    /// The calls' kernel batch size: tag TX times only on a batch's last
    /// run (its frame leaves at once; see the program).
    stamp_batch: u32,
    _pad0: u32,
}
// The kernel side's struct gen_cfg (src/xdp/generator.bpf.c) asserts the same size.
const _: () = assert!(std::mem::size_of::<RawGenCfg>() == 424);
// SAFETY: plain old data, no padding.
unsafe impl aya::Pod for RawGenCfg {}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawGenStats {
    runs: u64,
    bad: u64,
    idle: u64,
    first_ns: u64,
    first_runs: u64,
    last_ns: u64,
    last_runs: u64,
    /// Runs since zeroed (idle too): the place in the kernel batch.
    batch_pos: u64,
}
// The kernel side's struct gen_stats (src/xdp/generator.bpf.c) asserts the same size.
const _: () = assert!(std::mem::size_of::<RawGenStats>() == 64);
// SAFETY: plain old data, no padding.
unsafe impl aya::Pod for RawGenStats {}

/// `struct gen_pace` of `src/xdp/generator.bpf.c`: the schedule the
/// program keeps ([`Pacing::InProgram`]).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct RawPace {
    /// 1: paced.
    pub on: u64,
    /// 0: the schedule starts at the program's first run.
    pub start_ns: u64,
    /// Interval between frames in 1/65536 ns.
    pub gap_fp: u64,
    /// Frames to send in all.
    pub limit: u64,
    /// No frame at or after start_ns + span_ns.
    pub span_ns: u64,
    /// Frames sent so far.
    pub sent: u64,
    /// Largest lateness of a sent frame (ns), kept by the program.
    pub max_late: u64,
    /// 0: catch up after a late run; else slip the schedule past this (ns).
    pub max_lag: u64,
    /// ns the schedule slipped in all, and how many times.
    pub slipped: u64,
    pub slips: u64,
}
// The kernel side's struct gen_pace (src/xdp/generator.bpf.c) asserts the same size.
const _: () = assert!(std::mem::size_of::<RawPace>() == 80);
// SAFETY: plain old data, no padding.
unsafe impl aya::Pod for RawPace {}

/// `struct xdp_md` as the context of a test run.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct XdpMd {
    data: u32,
    data_end: u32,
    data_meta: u32,
    ingress_ifindex: u32,
    rx_queue_index: u32,
    egress_ifindex: u32,
}

/// The `test` member of `union bpf_attr`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// What a BPF_PROG_RUN call needs, shareable between the threads of an
/// overlapped paced run (the kernel only reads it).
#[derive(Clone, Copy)]
pub struct Runner<'a> {
    prog_fd: i32,
    frame: &'a [u8],
    ctx: &'a XdpMd,
    batch_size: u32,
    /// Round every call up to whole kernel batches (paced in the program:
    /// runs past the schedule's limit only idle), so that the program's
    /// `batch_pos` stays aligned with the batches and a tag's TX time is
    /// taken on a batch's last run only ([`GenConfig::tag`]).
    pub whole_batches: bool,
    what: &'a str,
}

impl Runner<'_> {
    /// One BPF_PROG_RUN call of `repeat` frames. Ok(false) if a signal cut
    /// it short.
    pub fn call(&self, repeat: u32) -> Result<bool, PortError> {
        let b = if self.batch_size == 0 {
            KERNEL_BATCH
        } else {
            self.batch_size
        };
        let repeat = if self.whole_batches {
            repeat.div_ceil(b).saturating_mul(b)
        } else {
            repeat
        };
        let attr = TestRunAttr {
            prog_fd: self.prog_fd as u32,
            data_size_in: self.frame.len() as u32,
            data_in: self.frame.as_ptr() as u64,
            repeat,
            ctx_size_in: std::mem::size_of::<XdpMd>() as u32,
            ctx_in: self.ctx as *const XdpMd as u64,
            flags: BPF_F_TEST_XDP_LIVE_FRAMES,
            batch_size: self.batch_size,
            ..Default::default()
        };
        // SAFETY: `attr` is a valid `bpf_attr.test` whose pointers (frame,
        // context) live across the call; the kernel only reads them.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_TEST_RUN,
                &attr as *const TestRunAttr,
                std::mem::size_of::<TestRunAttr>() as libc::c_uint,
            )
        };
        if r == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => Ok(false),
            Some(libc::EINVAL) => Err(PortError::new(format!(
                "{}: BPF_PROG_RUN with live frames refused: {e} (needs Linux >= 5.18; is the interface up?)",
                self.what
            ))),
            _ => Err(PortError::os(
                format!("{}: BPF_PROG_RUN with live frames", self.what),
                e,
            )),
        }
    }
}

/// A generator sending one template frame out of one interface.
pub struct XdpGen {
    prog: XdpProgram,
    what: String,
    prog_fd: i32,
    frame: Vec<u8>,
    ctx: XdpMd,
    batch_size: u32,
    pps: Option<f64>,
    pacing: Pacing,
    /// [`Pacing::InProgram`]: slip the schedule instead of catching up
    /// ([`XdpGen::set_max_lag`]).
    max_lag: Option<Duration>,
    /// [`Pacing::InProgram`]: (program runs per ns, fixed cost of a call
    /// in ns), measured once.
    calib: Option<(f64, f64)>,
    /// The program's configuration as written (stream changes rewrite it).
    raw: RawGenCfg,
}

/// Where the UDP header of an IPv4/IPv6 frame starts (after up to two VLAN
/// tags), and whether it is IPv6. `None` for anything else.
/// The mix's classes in `raw`: each distinct length with the template's
/// headers rewritten for it (IPv4 total length and checksum, UDP length).
fn set_mix(
    raw: &mut RawGenCfg,
    frame: &[u8],
    mix: &[u16],
    udp: Option<(usize, bool)>,
    cfg: &GenConfig,
    what: &str,
) -> Result<(), PortError> {
    let e = |m: String| PortError::new(format!("{what}: frame mix: {m}"));
    if mix.is_empty() || mix.len() > MIX_MAX {
        return Err(e(format!("{} entries (1 to {MIX_MAX})", mix.len())));
    }
    let Some((u, false)) = udp else {
        return Err(e("needs an IPv4 UDP template".into()));
    };
    if cfg.signature.is_some() || cfg.timestamp.is_some() {
        return Err(e(
            "goes with the tag, not the signature or the bare TX time".into(),
        ));
    }
    // The IPv4 header: after the Ethernet header and up to two VLAN tags
    // (udp_offset found it there).
    let mut l3 = 14;
    while l3 + 4 <= u
        && matches!(
            u16::from_be_bytes([frame[l3 - 2], frame[l3 - 1]]),
            0x8100 | 0x88a8
        )
    {
        l3 += 4;
    }
    let ihl = u - l3;
    let mut classes: Vec<u16> = Vec::new();
    for (i, &len) in mix.iter().enumerate() {
        let l = len as usize;
        if l > frame.len() || l < 60 || l < u + 8 {
            return Err(e(format!(
                "a {len}-byte frame (60 bytes up to the template's {})",
                frame.len()
            )));
        }
        if let Some(t) = cfg.tag {
            if t.offset + TAG_LEN > l {
                return Err(e(format!(
                    "the tag at {} does not fit in {len} bytes",
                    t.offset
                )));
            }
        }
        let c = match classes.iter().position(|&x| x == len) {
            Some(c) => c,
            None if classes.len() < MIX_CLASSES => {
                classes.push(len);
                classes.len() - 1
            }
            None => return Err(e(format!("more than {MIX_CLASSES} distinct lengths"))),
        };
        raw.mix_class[i] = c as u8;
    }
    for (c, &len) in classes.iter().enumerate() {
        let l = len as usize;
        let mut h = frame[..l.min(HDR_RESTORE)].to_vec();
        let ip_len = (l - l3) as u16;
        h[l3 + 2..l3 + 4].copy_from_slice(&ip_len.to_be_bytes());
        h[l3 + 10] = 0;
        h[l3 + 11] = 0;
        let ck = linerate_wire::checksum::checksum(&h[l3..l3 + ihl]);
        h[l3 + 10..l3 + 12].copy_from_slice(&ck.to_be_bytes());
        if u + 6 <= h.len() {
            h[u + 4..u + 6].copy_from_slice(&((l - u) as u16).to_be_bytes());
            // The payload varies per frame: no UDP checksum (IPv4).
            let end = (u + 8).min(h.len());
            h[u + 6..end].fill(0);
        }
        let restore = (h.len() / 8) * 8;
        raw.mix_len[c] = l as u32;
        raw.mix_hdr_len[c] = restore as u32;
        for (w, b) in raw.mix_hdr[c].iter_mut().zip(h[..restore].chunks_exact(8)) {
            *w = u64::from_ne_bytes(b.try_into().expect("8-byte chunk"));
        }
    }
    raw.mix_n = mix.len() as u32;
    Ok(())
}

fn udp_offset(f: &[u8]) -> Option<(usize, bool)> {
    let mut off = 12;
    let mut et = u16::from_be_bytes([*f.get(off)?, *f.get(off + 1)?]);
    for _ in 0..2 {
        if et == 0x8100 || et == 0x88a8 {
            off += 4;
            et = u16::from_be_bytes([*f.get(off)?, *f.get(off + 1)?]);
        }
    }
    let l3 = off + 2;
    match et {
        0x0800 => {
            let vihl = *f.get(l3)?;
            let ihl = (vihl & 0x0f) as usize * 4;
            let frag = u16::from_be_bytes([*f.get(l3 + 6)?, *f.get(l3 + 7)?]) & 0x3fff;
            if vihl >> 4 != 4 || ihl < 20 || frag != 0 || *f.get(l3 + 9)? != 17 {
                return None;
            }
            let u = l3 + ihl;
            (f.len() >= u + 8).then_some((u, false))
        }
        0x86dd => {
            if *f.get(l3 + 6)? != 17 {
                return None;
            }
            let u = l3 + 40;
            (f.len() >= u + 8).then_some((u, true))
        }
        _ => None,
    }
}

impl XdpGen {
    /// Prepare a generator that sends copies of `frame` out of `ifname`
    /// (in the calling thread's network namespace, which must also be the
    /// namespace of the thread that runs it).
    pub fn new(ifname: &str, frame: &[u8], cfg: GenConfig) -> Result<XdpGen, PortError> {
        let what = format!("XDP generator on '{ifname}'");
        if frame.len() < 14 || frame.len() > MAX_FRAME {
            return Err(PortError::new(format!(
                "{what}: a frame of {} bytes cannot be sent (14 to {MAX_FRAME})",
                frame.len()
            )));
        }
        if cfg.batch_size > MAX_BATCH {
            return Err(PortError::new(format!(
                "{what}: batch size {} is above the kernel's limit of {MAX_BATCH}",
                cfg.batch_size
            )));
        }
        let mut frame = frame.to_vec();
        let udp = udp_offset(&frame);
        let mut raw = RawGenCfg {
            flows: cfg.flows.max(1),
            sig_off: NO_SIG,
            ts_off: NO_SIG,
            tag_off: NO_SIG,
            ..Default::default()
        };
        if cfg.flows > 1 {
            match udp {
                Some((u, false)) => {
                    raw.port_off = u as u32;
                    raw.base_port = u16::from_be_bytes([frame[u], frame[u + 1]]) as u32;
                }
                Some((_, true)) => {
                    return Err(PortError::new(format!(
                        "{what}: flows > 1 is not supported for IPv6 UDP frames (the UDP checksum is mandatory and not recomputed)"
                    )))
                }
                None => {
                    return Err(PortError::new(format!(
                        "{what}: flows > 1 needs an IPv4 UDP frame (the UDP source port is varied)"
                    )))
                }
            }
        }
        if let Some(pps) = cfg.pps {
            if !(pps.is_finite() && pps >= 1.0) {
                return Err(PortError::new(format!(
                    "{what}: rate limit {pps} pps is not a number of at least 1"
                )));
            }
        }
        if let Some(sig) = cfg.signature {
            let off = sig.offset;
            if off.checked_add(SIG_LEN).is_none_or(|e| e > frame.len()) {
                return Err(PortError::new(format!(
                    "{what}: the {SIG_LEN}-byte signature at offset {off} does not fit in a {}-byte frame",
                    frame.len()
                )));
            }
            if let Some((u, true)) = udp {
                if off + SIG_LEN > u {
                    return Err(PortError::new(format!(
                        "{what}: signatures are not supported in IPv6 UDP frames (the UDP checksum is mandatory and not recomputed)"
                    )));
                }
            }
            raw.sig_off = off as u32;
            raw.sample_every = sig.sample_every.max(1);
            raw.stream = sig.stream as u32;
        }
        if let Some(ts) = cfg.timestamp {
            let off = ts.offset;
            if off.checked_add(8).is_none_or(|e| e > frame.len()) {
                return Err(PortError::new(format!(
                    "{what}: the 8-byte TX time at offset {off} does not fit in a {}-byte frame",
                    frame.len()
                )));
            }
            if let Some(sig) = cfg.signature {
                if off < sig.offset + SIG_LEN && sig.offset < off + 8 {
                    return Err(PortError::new(format!(
                        "{what}: the TX time at offset {off} overlaps the signature at {}",
                        sig.offset
                    )));
                }
            }
            if let Some((u, true)) = udp {
                if off >= u {
                    return Err(PortError::new(format!(
                        "{what}: TX times are not supported in IPv6 UDP payloads (the UDP checksum is mandatory and not recomputed)"
                    )));
                }
            }
            raw.ts_off = off as u32;
            raw.ts_every = ts.every.max(1);
        }
        if let Some(tag) = cfg.tag {
            let off = tag.offset;
            if off.checked_add(TAG_LEN).is_none_or(|e| e > frame.len()) {
                return Err(PortError::new(format!(
                    "{what}: the {TAG_LEN}-byte tag at offset {off} does not fit in a {}-byte frame",
                    frame.len()
                )));
            }
            if cfg.signature.is_some() || cfg.timestamp.is_some() {
                return Err(PortError::new(format!(
                    "{what}: the tag replaces the signature and the bare TX time: configure one"
                )));
            }
            if let Some((u, true)) = udp {
                if off + TAG_LEN > u {
                    return Err(PortError::new(format!(
                        "{what}: tags are not supported in IPv6 UDP frames (the UDP checksum is mandatory and not recomputed)"
                    )));
                }
            }
            raw.tag_off = off as u32;
            raw.tag_every = tag.every.max(1);
        }
        if let Some((u, false)) = udp {
            if cfg.flows > 1
                || cfg.signature.is_some()
                || cfg.timestamp.is_some()
                || cfg.tag.is_some()
            {
                // The frame changes per packet: no UDP checksum (allowed for IPv4).
                frame[u + 6] = 0;
                frame[u + 7] = 0;
            }
        }
        if let Some(mix) = cfg.mix {
            set_mix(&mut raw, &frame, mix, udp, &cfg, &what)?;
        }
        // Header restore: whole 8-byte words that fit in the frame.
        let restore = (frame.len().min(HDR_RESTORE) / 8) * 8;
        raw.hdr_len = restore as u32;
        for (w, b) in raw.hdr.iter_mut().zip(frame[..restore].chunks_exact(8)) {
            *w = u64::from_ne_bytes(b.try_into().expect("8-byte chunk"));
        }
        let idx = ifindex(ifname, &what)?;
        let mut prog = XdpProgram::load(&crate::xdp::objects::XDP_GEN.0, "xdp_gen", &what)?;
        {
            let map = prog
                .ebpf_mut()
                .map_mut("gen_cfg")
                .ok_or_else(|| map_err(&what, "gen_cfg", "missing"))?;
            let mut a: Array<_, RawGenCfg> =
                Array::try_from(map).map_err(|e| map_err(&what, "gen_cfg", e))?;
            a.set(0, raw, 0).map_err(|e| map_err(&what, "gen_cfg", e))?;
        }
        let prog_fd = {
            let p = prog
                .ebpf()
                .program("xdp_gen")
                .ok_or_else(|| PortError::new(format!("{what}: no program 'xdp_gen'")))?;
            p.fd()
                .map_err(|e| PortError::new(format!("{what}: program fd: {e}")))?
                .as_fd()
                .as_raw_fd()
        };
        let ctx = XdpMd {
            data_end: frame.len() as u32,
            ingress_ifindex: idx,
            ..Default::default()
        };
        Ok(XdpGen {
            prog,
            what,
            prog_fd,
            frame,
            ctx,
            batch_size: cfg.batch_size,
            pps: cfg.pps,
            max_lag: None,
            pacing: cfg.pacing,
            calib: None,
            raw,
        })
    }

    /// Tag the next frames with `stream` and sequence numbers from 0 (a
    /// trial; [`GenConfig::tag`], also the signature's stream id).
    pub fn set_stream(&mut self, stream: u16) -> Result<(), PortError> {
        let what = self.what.clone();
        self.raw.stream = stream as u32;
        self.write_cfg()?;
        let map = self
            .prog
            .ebpf_mut()
            .map_mut("gen_seq")
            .ok_or_else(|| map_err(&what, "gen_seq", "missing"))?;
        let mut a: Array<_, u64> =
            Array::try_from(map).map_err(|e| map_err(&what, "gen_seq", e))?;
        a.set(0, 0, 0).map_err(|e| map_err(&what, "gen_seq", e))
    }

    /// The program's configuration map from `self.raw`.
    fn write_cfg(&mut self) -> Result<(), PortError> {
        let what = self.what.clone();
        let map = self
            .prog
            .ebpf_mut()
            .map_mut("gen_cfg")
            .ok_or_else(|| map_err(&what, "gen_cfg", "missing"))?;
        let mut a: Array<_, RawGenCfg> =
            Array::try_from(map).map_err(|e| map_err(&what, "gen_cfg", e))?;
        a.set(0, self.raw, 0)
            .map_err(|e| map_err(&what, "gen_cfg", e))
    }

    /// Change the rate limit between runs (None: as fast as possible); the
    /// pacing calibration is kept.
    pub fn set_rate(&mut self, pps: Option<f64>) -> Result<(), PortError> {
        if let Some(p) = pps {
            if !(p.is_finite() && p >= 1.0) {
                return Err(PortError::new(format!(
                    "{}: rate limit {p} pps is not a number of at least 1",
                    self.what
                )));
            }
        }
        if pps.is_none() && self.pps.is_some() {
            // Unpaced runs send on every program run: switch the schedule off.
            self.set_pace(RawPace::default())?;
        }
        self.pps = pps;
        Ok(())
    }

    /// [`Pacing::InProgram`]: what a frame that is due late does (the
    /// thread was preempted, between two calls). `None` (the default): it
    /// leaves at once and the frames due after it follow at top speed until
    /// the schedule is met (a catch-up burst, which keeps the long-run rate
    /// and count). `Some(lag)`: a frame more than `lag` late makes the
    /// schedule slip so that it is due now; the frames after it keep their
    /// spacing, the stream has a gap instead of a burst, and a timed run
    /// sends fewer frames ([`GenStats::slipped_ns`] says how much time the
    /// gaps took). For latency measurement: a burst queues in the device
    /// under test and its frames' latency would be the generator's. The
    /// program's end moves with the slips: a timed run (`send_for`) may
    /// send up to the slipped time after its end plus `END_GRACE`; the
    /// bench's trials are counted runs (`send`).
    pub fn set_max_lag(&mut self, lag: Option<Duration>) {
        self.max_lag = lag;
    }

    /// Change the frames per kernel batch between runs (0: the kernel's
    /// default, 64). A frame handed to XDP_TX leaves when its batch is
    /// flushed, after the batch's later runs: a small batch for latency
    /// trials, a large one for speed. The pacing calibration is redone.
    pub fn set_batch_size(&mut self, n: u32) -> Result<(), PortError> {
        if n > MAX_BATCH {
            return Err(PortError::new(format!(
                "{}: batch size {n} is above the kernel's limit of {MAX_BATCH}",
                self.what
            )));
        }
        if n != self.batch_size {
            self.batch_size = n;
            self.calib = None;
        }
        Ok(())
    }

    /// The template as sent (UDP checksum cleared when fields vary).
    pub fn frame(&self) -> &[u8] {
        &self.frame
    }

    /// Program runs that returned XDP_TX so far, summed over CPUs.
    pub fn total_sent(&self) -> Result<u64, PortError> {
        Ok(self.stats()?.0)
    }

    /// The program's per-CPU statistics.
    fn raw_stats(&self) -> Result<Vec<RawGenStats>, PortError> {
        let map = self
            .prog
            .ebpf()
            .map("gen_stats")
            .ok_or_else(|| map_err(&self.what, "gen_stats", "missing"))?;
        let arr: PerCpuArray<_, RawGenStats> =
            PerCpuArray::try_from(map).map_err(|e| map_err(&self.what, "gen_stats", e))?;
        let v = arr
            .get(&0, 0)
            .map_err(|e| map_err(&self.what, "gen_stats", e))?;
        Ok(v.iter().copied().collect())
    }

    /// (runs that sent, paced runs that did not), summed over CPUs.
    pub fn stats(&self) -> Result<(u64, u64), PortError> {
        Ok(self
            .raw_stats()?
            .iter()
            .fold((0, 0), |a, s| (a.0 + s.runs, a.1 + s.idle)))
    }

    /// Zero the send-span stamps of every CPU (before a run).
    pub fn span_reset(&mut self) -> Result<(), PortError> {
        let what = self.what.clone();
        let mut vals = self.raw_stats()?;
        let map = self
            .prog
            .ebpf_mut()
            .map_mut("gen_stats")
            .ok_or_else(|| map_err(&what, "gen_stats", "missing"))?;
        let mut arr: PerCpuArray<_, RawGenStats> =
            PerCpuArray::try_from(map).map_err(|e| map_err(&what, "gen_stats", e))?;
        for x in &mut vals {
            x.first_ns = 0;
            x.first_runs = 0;
            x.last_ns = 0;
            x.last_runs = 0;
            // Batches start here (the calls that follow are whole ones
            // when paced in the program: [`Runner::whole_batches`]).
            x.batch_pos = 0;
        }
        let n = vals.len();
        let pv = aya::maps::PerCpuValues::try_from(vals)
            .map_err(|e| map_err(&what, "gen_stats", format!("{e} ({n} CPUs)")))?;
        arr.set(0, pv, 0)
            .map_err(|e| map_err(&what, "gen_stats", e))
    }

    /// Widen `st`'s first and last stamps ([`GenStats::first_ns`]) by
    /// the stamps the program holds now (before they are zeroed).
    pub fn note_stamps(&self, st: &mut GenStats) -> Result<(), PortError> {
        for c in self.raw_stats()?.iter().filter(|c| c.first_ns != 0) {
            if st.first_ns == 0 || c.first_ns < st.first_ns {
                st.first_ns = c.first_ns;
            }
            st.last_ns = st.last_ns.max(c.last_ns);
        }
        Ok(())
    }

    /// The time the frames of the run took to leave (ns), from the
    /// program's stamps: each CPU's stamped span scaled to its frames
    /// (`sent` in all), the CPUs' spans merged. 0 if too few were stamped.
    pub fn send_span_ns(&self, sent: u64) -> Result<u64, PortError> {
        let v = self.raw_stats()?;
        let (mut first, mut last, mut stamped) = (u64::MAX, 0u64, 0u64);
        for c in v
            .iter()
            .filter(|c| c.first_ns != 0 && c.last_runs > c.first_runs)
        {
            first = first.min(c.first_ns);
            last = last.max(c.last_ns);
            stamped += c.last_runs - c.first_runs;
        }
        if stamped == 0 || last <= first {
            return Ok(0);
        }
        // `stamped` frames left in last - first ns; `sent` at that rate.
        Ok(((last - first) as f64 * sent as f64 / stamped as f64) as u64)
    }

    /// One BPF_PROG_RUN call of `repeat` frames. Ok(false) if a signal cut
    /// it short.
    pub fn call(&mut self, repeat: u32) -> Result<bool, PortError> {
        self.runner().call(repeat)
    }

    /// What a BPF_PROG_RUN call needs, for calls from several threads.
    pub fn runner(&self) -> Runner<'_> {
        Runner {
            prog_fd: self.prog_fd,
            frame: &self.frame,
            ctx: &self.ctx,
            batch_size: self.batch_size,
            whole_batches: self.pps.is_some() && self.pacing == Pacing::InProgram,
            what: &self.what,
        }
    }

    /// Before a run: where the program stamps a tag's TX time. Paced in
    /// the program, the calls are whole kernel batches and a tag's TX time
    /// is taken only on a batch's last run (its frame leaves at once: a
    /// stamped frame does not wait for the batch's later runs, measured on
    /// the empty bed at 1 Mpps as p50 3.8 us with batches of 64 against
    /// 0.3 us with 1). Other runs stamp every `tag.every`-th frame
    /// wherever it is in its batch.
    pub fn align_stamps(&mut self) -> Result<(), PortError> {
        let stamp_batch = match (self.runner().whole_batches, self.batch_size) {
            (false, _) => 0,
            (true, 0) => KERNEL_BATCH,
            (true, b) => b,
        };
        if stamp_batch != self.raw.stamp_batch {
            self.raw.stamp_batch = stamp_batch;
            self.write_cfg()?;
        }
        Ok(())
    }

    /// The rate limit ([`XdpGen::set_rate`]) and how it is applied.
    pub fn rate(&self) -> (Option<f64>, Pacing) {
        (self.pps, self.pacing)
    }

    /// [`XdpGen::set_max_lag`]'s setting.
    pub fn max_lag(&self) -> Option<Duration> {
        self.max_lag
    }

    /// [`Pacing::InProgram`]: (program runs per ns, fixed cost of a call
    /// in ns) as measured for the current batch size, if it was.
    pub fn calibration(&self) -> Option<(f64, f64)> {
        self.calib
    }

    /// Keep a calibration (forgotten when the batch size changes).
    pub fn set_calibration(&mut self, c: (f64, f64)) {
        self.calib = Some(c);
    }

    fn pace_map(&mut self) -> Result<Array<&mut aya::maps::MapData, RawPace>, PortError> {
        let what = &self.what;
        let map = self
            .prog
            .ebpf_mut()
            .map_mut("gen_pace")
            .ok_or_else(|| map_err(what, "gen_pace", "missing"))?;
        Array::try_from(map).map_err(|e| map_err(what, "gen_pace", e))
    }

    /// The program's schedule ([`Pacing::InProgram`]) as it stands.
    pub fn pace(&mut self) -> Result<RawPace, PortError> {
        let what = self.what.clone();
        self.pace_map()?
            .get(&0, 0)
            .map_err(|e| map_err(&what, "gen_pace", e))
    }

    /// Write the program's schedule.
    pub fn set_pace(&mut self, p: RawPace) -> Result<(), PortError> {
        let what = self.what.clone();
        self.pace_map()?
            .set(0, p, 0)
            .map_err(|e| map_err(&what, "gen_pace", e))
    }
}

/// An untagged IPv4/UDP frame of `frame_len` bytes (at least 42; without
/// FCS) with a valid IP header checksum, UDP checksum 0 and a zero
/// payload starting at [`IPV4_UDP_PAYLOAD`].
pub fn ipv4_udp_frame(
    dst: [u8; 6],
    src: [u8; 6],
    ip_src: [u8; 4],
    ip_dst: [u8; 4],
    sport: u16,
    dport: u16,
    frame_len: usize,
) -> Vec<u8> {
    let len = frame_len.clamp(IPV4_UDP_PAYLOAD, MAX_FRAME);
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&ip_src);
    ip[16..20].copy_from_slice(&ip_dst);
    let mut sum: u32 = ip
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&dport.to_be_bytes());
    udp[4..6].copy_from_slice(&((len - 34) as u16).to_be_bytes());
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_offsets() {
        let f = ipv4_udp_frame([2; 6], [4; 6], [10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000, 60);
        assert_eq!(f.len(), 60);
        assert_eq!(udp_offset(&f), Some((34, false)));
        // A VLAN tag moves it by 4.
        let mut v = f[..12].to_vec();
        v.extend_from_slice(&[0x81, 0x00, 0, 5]);
        v.extend_from_slice(&f[12..]);
        assert_eq!(udp_offset(&v), Some((38, false)));
        // Truncated or not UDP: none, never a panic.
        assert_eq!(udp_offset(&f[..20]), None);
        assert_eq!(udp_offset(&f[..13]), None);
        let mut t = f.clone();
        t[23] = 6;
        assert_eq!(udp_offset(&t), None);
        // The IP header checksum verifies.
        let s: u32 = f[14..34]
            .chunks(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
            .sum();
        assert_eq!((s & 0xffff) + (s >> 16), 0xffff);
    }
}
