//! The in-kernel sink counter (`src/xdp/count.bpf.c`): an XDP program that
//! counts the packets and bytes it receives in a per-CPU array and drops
//! them (or passes them to the stack). Optionally it reads the big-endian
//! u64 sequence number that [`crate::xdp::generator::XdpGen`] writes and keeps the
//! largest one seen.
//!
//! Verified frames ([`XdpCount::attach_verified`]): every frame must carry
//! the generator's 18-byte tag ([`crate::xdp::generator::TagConfig`]: magic,
//! stream, 48-bit sequence number, TX time). The sink counts a frame as
//! received only when it carries this trial's stream
//! ([`XdpCount::set_stream`]) and a sequence number not seen before in it;
//! foreign frames (no tag), stale ones (an earlier stream: a late frame),
//! duplicates and reordered frames are counted apart. Duplicates are found
//! exactly: a bit per sequence number in a 16 MiB half of the `count_seen`
//! map ([`SEEN_PER_TRIAL`] frames per trial; later ones are counted as
//! `beyond`, not checked), set with an atomic fetch-or.
//!
//! Attaching it to the receiving end of a veth also activates the veth's
//! native XDP path (NAPI), which XDP_TX / XDP_REDIRECT into that veth need.
//!
//! ```no_run
//! # use linerate_io::xdp::{count::XdpCount, AttachMode};
//! let sink = XdpCount::attach("d0", AttachMode::Native, false)?;
//! // ... traffic ...
//! println!("{} packets", sink.read()?.packets);
//! # Ok::<(), linerate_io::PortError>(())
//! ```

use crate::error::PortError;
use crate::xdp::{AttachMode, XdpProgram};
use aya::maps::{Array, Map, PerCpuArray};
use std::os::fd::{AsFd, AsRawFd};

const NO_SEQ: u32 = u32::MAX;
/// Length of the generator's tag (`TAG_LEN` in `xdp_count.c`).
pub const TAG_LEN: usize = 18;
/// u64 words of one half of `count_seen` (`SEEN_HALF_WORDS`).
const SEEN_HALF_WORDS: usize = 1 << 21;
/// Sequence numbers a trial can verify for duplicates (134 M frames: 37 s
/// at 3.6 Mpps).
pub const SEEN_PER_TRIAL: u64 = SEEN_HALF_WORDS as u64 * 64;
/// Largest sequence-number offset the program accepts (it bounds packet
/// accesses for the verifier).
pub const MAX_SEQ_OFFSET: usize = 4096;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CountCfg {
    pass: u32,
    seq_off: u32,
    ts_off: u32,
    tag_off: u32,
    stream: u32,
    /// 0 or an IPv4 address in network order whose ARP requests the
    /// program passes to the stack, uncounted.
    arp_ip: u32,
}
// The kernel side's struct count_cfg (src/xdp/count.bpf.c) asserts the same size.
const _: () = assert!(std::mem::size_of::<CountCfg>() == 24);
// SAFETY: plain old data, no padding.
unsafe impl aya::Pod for CountCfg {}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawCountStats {
    packets: u64,
    bytes: u64,
    max_seq: u64,
    no_seq: u64,
    lat_count: u64,
    lat_sum: u64,
    lat_min: u64,
    lat_max: u64,
    lat_bad: u64,
    verified: u64,
    foreign: u64,
    stale: u64,
    dup: u64,
    beyond: u64,
    reordered: u64,
    cur: u64,
    next_seq: u64,
    arp_passed: u64,
}
// The kernel side's struct count_stats (src/xdp/count.bpf.c) asserts the same size.
const _: () = assert!(std::mem::size_of::<RawCountStats>() == 144);
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
    /// Latency ([`XdpCount::attach_latency`]): frames with a TX time
    /// recorded, the sum, smallest and largest of their latencies (ns).
    pub lat_count: u64,
    pub lat_sum_ns: u64,
    pub lat_min_ns: Option<u64>,
    pub lat_max_ns: u64,
    /// Frames whose TX time was in the future or over 60 s old.
    pub lat_bad: u64,
    /// Verification ([`XdpCount::attach_verified`]; all 0 otherwise):
    /// packets = verified + foreign + stale + dup + beyond.
    /// Frames of the current stream, each sequence number once.
    pub verified: u64,
    /// Frames without the tag (too short, wrong magic).
    pub foreign: u64,
    /// Frames of another stream (sent in an earlier trial).
    pub stale: u64,
    /// Frames whose sequence number was seen before in this stream.
    pub dup: u64,
    /// Frames past [`SEEN_PER_TRIAL`] in this stream: counted as received,
    /// not checked for duplicates.
    pub beyond: u64,
    /// Verified frames whose sequence number was below the largest one the
    /// same CPU had verified before.
    pub reordered: u64,
    /// Exact smallest and largest latency (ns) of the current stream's
    /// verified frames (None: none timed yet).
    pub stream_lat_min_ns: Option<u64>,
    pub stream_lat_max_ns: Option<u64>,
    /// ARP requests for the address of [`XdpCount::pass_arp`] passed to
    /// the stack (not in `packets`).
    pub arp_passed: u64,
}

impl CountStats {
    /// The counters that only grow, as counted after `earlier` (saturating;
    /// the stream's min/max are taken as they are now).
    pub fn since(&self, earlier: &CountStats) -> CountStats {
        CountStats {
            packets: self.packets.saturating_sub(earlier.packets),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            no_seq: self.no_seq.saturating_sub(earlier.no_seq),
            lat_count: self.lat_count.saturating_sub(earlier.lat_count),
            lat_sum_ns: self.lat_sum_ns.saturating_sub(earlier.lat_sum_ns),
            lat_bad: self.lat_bad.saturating_sub(earlier.lat_bad),
            verified: self.verified.saturating_sub(earlier.verified),
            foreign: self.foreign.saturating_sub(earlier.foreign),
            stale: self.stale.saturating_sub(earlier.stale),
            dup: self.dup.saturating_sub(earlier.dup),
            beyond: self.beyond.saturating_sub(earlier.beyond),
            reordered: self.reordered.saturating_sub(earlier.reordered),
            arp_passed: self.arp_passed.saturating_sub(earlier.arp_passed),
            ..*self
        }
    }
}

/// `count_seen` mapped into this process (to zero a half per trial).
struct SeenMap {
    ptr: *mut u64,
    len: usize,
}
// SAFETY: a shared mapping owned by this value; written only through
// `&mut XdpCount` (set_stream), read by nobody in user space.
unsafe impl Send for SeenMap {}
// SAFETY: as above: no access through a shared reference.
unsafe impl Sync for SeenMap {}

impl Drop for SeenMap {
    fn drop(&mut self) {
        // SAFETY: ptr/len are the mapping made in `attach_full`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The sink counter attached to one interface; detached on drop.
pub struct XdpCount {
    prog: XdpProgram,
    what: String,
    cfg: CountCfg,
    seen: Option<SeenMap>,
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

    /// As [`XdpCount::attach`], also recording the one-way latency of
    /// frames carrying the bare TX time that
    /// [`crate::xdp::generator::GenConfig::timestamp`] writes at `ts_offset` (0 there:
    /// not timestamped) in a histogram ([`XdpCount::latency`]).
    pub fn attach_latency(
        ifname: &str,
        mode: AttachMode,
        pass: bool,
        ts_offset: usize,
    ) -> Result<XdpCount, PortError> {
        XdpCount::attach_full(ifname, mode, pass, None, Some(ts_offset), None)
    }

    /// As [`XdpCount::attach`], verifying every frame by the 18-byte tag
    /// the generator writes at `tag_offset` ([`crate::xdp::generator::TagConfig`];
    /// see the module documentation) and timing the tagged frames that
    /// carry a TX time. Call [`XdpCount::set_stream`] before each trial.
    pub fn attach_verified(
        ifname: &str,
        mode: AttachMode,
        pass: bool,
        tag_offset: usize,
    ) -> Result<XdpCount, PortError> {
        XdpCount::attach_full(ifname, mode, pass, None, None, Some(tag_offset))
    }

    /// Pass ARP requests for `ip` to the stack without counting them (the
    /// tester's address on an external port: a packet socket answers them,
    /// so that a router delivers to it, as in TRex's L3 mode); None: count
    /// them as every other frame.
    pub fn pass_arp(&mut self, ip: Option<std::net::Ipv4Addr>) -> Result<(), PortError> {
        let mut cfg = self.cfg;
        cfg.arp_ip = ip.map_or(0, |ip| u32::from_ne_bytes(ip.octets()));
        set_cfg(&mut self.prog, &self.what, cfg)?;
        self.cfg = cfg;
        Ok(())
    }

    /// Start verifying `stream` (a trial): frames of any other stream are
    /// stale from now on. Clears the duplicate bitmap this stream uses
    /// (one 16 MiB memset), then switches the program over.
    pub fn set_stream(&mut self, stream: u16) -> Result<(), PortError> {
        let seen = self.seen.as_ref().ok_or_else(|| {
            PortError::new(format!("{}: not attached for verified frames", self.what))
        })?;
        let half = (stream & 1) as usize * SEEN_HALF_WORDS;
        // SAFETY: the mapping holds 2 * SEEN_HALF_WORDS words; the program
        // writes this half only for frames of `stream` (not current yet)
        // or of `stream` - 2 (two trials ago: long gone).
        unsafe { std::ptr::write_bytes(seen.ptr.add(half), 0, SEEN_HALF_WORDS) };
        self.cfg.stream = stream as u32;
        let (what, cfg) = (self.what.clone(), self.cfg);
        set_cfg(&mut self.prog, &what, cfg)
    }

    /// The stream set last ([`XdpCount::set_stream`]).
    pub fn stream(&self) -> u16 {
        self.cfg.stream as u16
    }

    /// As [`XdpCount::attach`], also reading a big-endian u64 sequence
    /// number at `seq_offset` bytes into each frame.
    pub fn attach_with_seq(
        ifname: &str,
        mode: AttachMode,
        pass: bool,
        seq_offset: Option<usize>,
    ) -> Result<XdpCount, PortError> {
        XdpCount::attach_full(ifname, mode, pass, seq_offset, None, None)
    }

    fn attach_full(
        ifname: &str,
        mode: AttachMode,
        pass: bool,
        seq_offset: Option<usize>,
        ts_offset: Option<usize>,
        tag_offset: Option<usize>,
    ) -> Result<XdpCount, PortError> {
        let what = format!("XDP counter on '{ifname}'");
        for (name, o) in [
            ("sequence", seq_offset),
            ("TX time", ts_offset),
            ("tag", tag_offset),
        ] {
            if let Some(off) = o {
                if off > MAX_SEQ_OFFSET {
                    return Err(PortError::new(format!(
                        "{what}: {name} offset {off} is beyond the supported {MAX_SEQ_OFFSET}"
                    )));
                }
            }
        }
        let idx = ifindex(ifname, &what)?;
        let mut prog = XdpProgram::load(&crate::xdp::objects::XDP_COUNT.0, "xdp_count", &what)?;
        let cfg = CountCfg {
            pass: pass as u32,
            seq_off: seq_offset.map_or(NO_SEQ, |o| o as u32),
            ts_off: ts_offset.map_or(NO_SEQ, |o| o as u32),
            tag_off: tag_offset.map_or(NO_SEQ, |o| o as u32),
            stream: 0,
            arp_ip: 0,
        };
        set_cfg(&mut prog, &what, cfg)?;
        let seen = match tag_offset {
            Some(_) => Some(map_seen(&prog, &what)?),
            None => None,
        };
        // Configured before attaching: the program never sees a zero config.
        prog.attach(idx, mode)?;
        Ok(XdpCount {
            prog,
            what,
            cfg,
            seen,
        })
    }

    /// The counters summed over CPUs (one map read: a syscall). An error
    /// is an error: a trial must never read zeros for a count.
    pub fn read(&self) -> Result<CountStats, PortError> {
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
        let cur = self.cfg.stream as u64 + 1;
        for v in per_cpu.iter() {
            s.verified += v.verified;
            s.foreign += v.foreign;
            s.stale += v.stale;
            s.dup += v.dup;
            s.beyond += v.beyond;
            s.reordered += v.reordered;
            s.arp_passed += v.arp_passed;
            if self.cfg.tag_off != NO_SEQ && v.cur == cur && v.lat_min != 0 {
                s.stream_lat_min_ns =
                    Some(s.stream_lat_min_ns.map_or(v.lat_min, |m| m.min(v.lat_min)));
                s.stream_lat_max_ns =
                    Some(s.stream_lat_max_ns.map_or(v.lat_max, |m| m.max(v.lat_max)));
            }
            s.packets += v.packets;
            s.bytes += v.bytes;
            s.no_seq += v.no_seq;
            max_seq = max_seq.max(v.max_seq);
            s.lat_count += v.lat_count;
            s.lat_sum_ns += v.lat_sum;
            s.lat_bad += v.lat_bad;
            s.lat_max_ns = s.lat_max_ns.max(v.lat_max);
            if v.lat_min != 0 {
                s.lat_min_ns = Some(s.lat_min_ns.map_or(v.lat_min, |m| m.min(v.lat_min)));
            }
        }
        s.max_seq = max_seq.checked_sub(1);
        Ok(s)
    }

    /// The latency histogram so far, summed over CPUs (one map read per
    /// bucket: ~1000 syscalls, call it between trials, not per packet).
    pub fn latency(&self) -> Result<LatencyHistogram, PortError> {
        let map = self
            .prog
            .ebpf()
            .map("count_lat")
            .ok_or_else(|| map_err(&self.what, "count_lat", "missing"))?;
        let arr: PerCpuArray<_, u64> =
            PerCpuArray::try_from(map).map_err(|e| map_err(&self.what, "count_lat", e))?;
        let mut h = LatencyHistogram::default();
        for (i, b) in h.buckets.iter_mut().enumerate() {
            let v = arr
                .get(&(i as u32), 0)
                .map_err(|e| map_err(&self.what, "count_lat", e))?;
            *b = v.iter().sum();
        }
        Ok(h)
    }
}

fn set_cfg(prog: &mut XdpProgram, what: &str, cfg: CountCfg) -> Result<(), PortError> {
    let map = prog
        .ebpf_mut()
        .map_mut("count_cfg")
        .ok_or_else(|| map_err(what, "count_cfg", "missing"))?;
    let mut a: Array<_, CountCfg> =
        Array::try_from(map).map_err(|e| map_err(what, "count_cfg", e))?;
    a.set(0, cfg, 0).map_err(|e| map_err(what, "count_cfg", e))
}

/// mmap `count_seen` (BPF_F_MMAPABLE) read-write.
fn map_seen(prog: &XdpProgram, what: &str) -> Result<SeenMap, PortError> {
    let m = prog
        .ebpf()
        .map("count_seen")
        .ok_or_else(|| map_err(what, "count_seen", "missing"))?;
    let Map::Array(data) = m else {
        return Err(map_err(what, "count_seen", "not an array"));
    };
    let fd = data.fd().as_fd().as_raw_fd();
    let len = 2 * SEEN_HALF_WORDS * 8;
    // SAFETY: mapping a BPF array map created with BPF_F_MMAPABLE, of
    // exactly its size; checked for MAP_FAILED below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(PortError::os(
            format!("{what}: mmap of BPF map 'count_seen'"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(SeenMap { ptr: p.cast(), len })
}

/// Buckets of the sink's latency histogram (`LAT_BUCKETS` in `xdp_count.c`).
pub const LAT_BUCKETS: usize = 1024;

/// The sink's latency histogram: log-linear buckets (exact below 16 ns,
/// then 16 per power of two: a bucket is at most 1/16 of its values wide).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatencyHistogram {
    pub buckets: Vec<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            buckets: vec![0; LAT_BUCKETS],
        }
    }
}

impl LatencyHistogram {
    /// The bucket a latency of `v` ns falls in (as the program computes it).
    pub fn bucket_of(v: u64) -> usize {
        if v < 16 {
            return v as usize;
        }
        let m = 63 - v.leading_zeros() as usize;
        (m - 3) * 16 + ((v >> (m - 4)) & 15) as usize
    }

    /// [low, high) of bucket `i` in ns.
    pub fn bounds(i: usize) -> (u64, u64) {
        if i < 16 {
            return (i as u64, i as u64 + 1);
        }
        let m = i / 16 + 3;
        let sub = (i % 16) as u64;
        let w = 1u64 << (m - 4);
        let lo = (16 + sub) << (m - 4);
        (lo, lo.saturating_add(w))
    }

    /// Frames recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// What was recorded after `earlier` was read (saturating).
    pub fn since(&self, earlier: &LatencyHistogram) -> LatencyHistogram {
        LatencyHistogram {
            buckets: self
                .buckets
                .iter()
                .zip(&earlier.buckets)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
        }
    }

    /// The `q` quantile (0..=1) in ns: the middle of the bucket holding it
    /// (None when empty).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = Self::bounds(i);
                return Some((lo as f64 + hi as f64 - 1.0) / 2.0);
            }
        }
        None
    }

    /// (bucket middle in ns, count) of the non-empty buckets.
    pub fn points(&self) -> Vec<(f64, u64)> {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| {
                let (lo, hi) = Self::bounds(i);
                ((lo as f64 + hi as f64 - 1.0) / 2.0, c)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::LatencyHistogram as H;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for v in (0..5000u64).chain([1 << 20, 123_456_789, u64::MAX / 3, u64::MAX]) {
            let b = H::bucket_of(v);
            assert!(b < super::LAT_BUCKETS, "{v} -> {b}");
            let (lo, hi) = H::bounds(b);
            assert!(
                lo <= v && (v < hi || hi == u64::MAX),
                "{v} not in [{lo},{hi})"
            );
            if v < 5000 {
                assert!(b >= last);
                last = b;
            }
            // A bucket is at most 1/16 of its values wide.
            assert!((hi - lo) as f64 <= (lo as f64 / 16.0).max(1.0));
        }
        assert_eq!(H::bucket_of(u64::MAX), 975);
    }

    #[test]
    fn quantiles_from_buckets() {
        let mut h = H::default();
        for v in [1000u64, 2000, 3000, 4000] {
            h.buckets[H::bucket_of(v)] += 25;
        }
        let p50 = h.quantile(0.5).unwrap();
        assert!((p50 - 2000.0).abs() <= 2000.0 / 16.0, "{p50}");
        let p100 = h.quantile(1.0).unwrap();
        assert!((p100 - 4000.0).abs() <= 4000.0 / 16.0, "{p100}");
        assert_eq!(h.count(), 100);
        assert_eq!(h.since(&h).count(), 0);
        assert!(H::default().quantile(0.5).is_none());
    }
}
