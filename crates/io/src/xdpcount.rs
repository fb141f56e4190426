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
    ts_off: u32,
    _pad: u32,
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
    lat_count: u64,
    lat_sum: u64,
    lat_min: u64,
    lat_max: u64,
    lat_bad: u64,
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
    /// Latency ([`XdpCount::attach_latency`]): frames with a TX time
    /// recorded, the sum, smallest and largest of their latencies (ns).
    pub lat_count: u64,
    pub lat_sum_ns: u64,
    pub lat_min_ns: Option<u64>,
    pub lat_max_ns: u64,
    /// Frames whose TX time was in the future or over 60 s old.
    pub lat_bad: u64,
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

    /// As [`XdpCount::attach`], also recording the one-way latency of
    /// frames carrying the bare TX time that
    /// [`crate::xdpgen::GenConfig::timestamp`] writes at `ts_offset` (0 there:
    /// not timestamped) in a histogram ([`XdpCount::latency`]).
    pub fn attach_latency(
        ifname: &str,
        mode: AttachMode,
        pass: bool,
        ts_offset: usize,
    ) -> Result<XdpCount, PortError> {
        XdpCount::attach_full(ifname, mode, pass, None, Some(ts_offset))
    }

    /// As [`XdpCount::attach`], also reading a big-endian u64 sequence
    /// number at `seq_offset` bytes into each frame.
    pub fn attach_with_seq(
        ifname: &str,
        mode: AttachMode,
        pass: bool,
        seq_offset: Option<usize>,
    ) -> Result<XdpCount, PortError> {
        XdpCount::attach_full(ifname, mode, pass, seq_offset, None)
    }

    fn attach_full(
        ifname: &str,
        mode: AttachMode,
        pass: bool,
        seq_offset: Option<usize>,
        ts_offset: Option<usize>,
    ) -> Result<XdpCount, PortError> {
        let what = format!("xdpcount on '{ifname}'");
        for (name, o) in [("sequence", seq_offset), ("TX time", ts_offset)] {
            if let Some(off) = o {
                if off > MAX_SEQ_OFFSET {
                    return Err(PortError::new(format!(
                        "{what}: {name} offset {off} is beyond the supported {MAX_SEQ_OFFSET}"
                    )));
                }
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
                ts_off: ts_offset.map_or(NO_SEQ, |o| o as u32),
                _pad: 0,
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

    /// The counters summed over CPUs; zeros if the map cannot be read
    /// (which does not happen while the program is loaded).
    pub fn read(&self) -> CountStats {
        self.try_read().unwrap_or_default()
    }
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
