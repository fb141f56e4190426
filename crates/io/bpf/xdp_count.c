// SPDX-License-Identifier: GPL-2.0
// linerate's sink counter: counts packets and bytes per CPU and drops the
// frame (or passes it to the stack when configured). Optionally reads the
// big-endian u64 sequence number written by xdp_gen at a configured offset
// and keeps the largest seen (+1) per CPU. Optionally reads the bare
// big-endian u64 TX time xdp_gen writes (ts_off) and records the one-way
// latency (bpf_ktime_get_ns() here minus the TX time: both programs read
// the same CLOCK_MONOTONIC) in a log-linear histogram.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define NO_SEQ 0xffffffffu
#define MAX_SEQ_OFF 4096

struct count_cfg {
	__u32 pass;    // 1: XDP_PASS, 0: XDP_DROP
	__u32 seq_off; // NO_SEQ: do not read a sequence number
	__u32 ts_off;  // NO_SEQ: no TX time to read
	__u32 pad;
};

struct count_stats {
	__u64 packets;
	__u64 bytes;
	__u64 max_seq;  // largest sequence number + 1 seen (0: none)
	__u64 no_seq;   // frames too short to hold the sequence number
	__u64 lat_count; // frames with a TX time, recorded in the histogram
	__u64 lat_sum;   // sum of their latencies (ns)
	__u64 lat_min;   // smallest latency (ns; 0: none yet)
	__u64 lat_max;   // largest latency (ns)
	__u64 lat_bad;   // TX time in the future or over 60 s old: not recorded
};

// Latency histogram, log-linear: values below 16 ns have a bucket each;
// above, 16 sub-buckets per power of two (bucket width <= 1/16 of the
// value: percentiles within 6.25 %). Bucket of v >= 16 with msb m:
// (m - 3) * 16 + ((v >> (m - 4)) & 15); the largest (m = 63) is 975.
#define LAT_BUCKETS 1024
#define LAT_MAX_NS (60ull * 1000000000ull)

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LAT_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} count_lat SEC(".maps");

static __always_inline __u32 msb64(__u64 v)
{
	__u32 m = 0;
	if (v >> 32) { v >>= 32; m += 32; }
	if (v >> 16) { v >>= 16; m += 16; }
	if (v >> 8) { v >>= 8; m += 8; }
	if (v >> 4) { v >>= 4; m += 4; }
	if (v >> 2) { v >>= 2; m += 2; }
	if (v >> 1) { m += 1; }
	return m;
}

static __always_inline __u32 lat_bucket(__u64 v)
{
	if (v < 16)
		return (__u32)v;
	__u32 m = msb64(v);
	return (m - 3) * 16 + (__u32)((v >> (m - 4)) & 15);
}

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct count_cfg);
} count_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct count_stats);
} count_stats SEC(".maps");

SEC("xdp")
int xdp_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 k = 0;
	struct count_cfg *cfg = bpf_map_lookup_elem(&count_cfg, &k);
	struct count_stats *st = bpf_map_lookup_elem(&count_stats, &k);
	if (!cfg || !st)
		return XDP_PASS;
	st->packets++;
	st->bytes += data_end - data;
	__u32 off = cfg->seq_off;
	if (off != NO_SEQ) {
		if (off > MAX_SEQ_OFF) {
			st->no_seq++;
		} else {
			__u8 *p = data + off;
			if ((void *)(p + 8) > data_end) {
				st->no_seq++;
			} else {
				__u64 seq;
				__builtin_memcpy(&seq, p, 8);
				seq = __builtin_bswap64(seq);
				if (seq + 1 > st->max_seq)
					st->max_seq = seq + 1;
			}
		}
	}
	off = cfg->ts_off;
	if (off != NO_SEQ && off <= MAX_SEQ_OFF) {
		__u8 *p = data + off;
		if ((void *)(p + 8) <= data_end) {
			__u64 tx;
			__builtin_memcpy(&tx, p, 8);
			tx = __builtin_bswap64(tx);
			if (tx) {
				__u64 now = bpf_ktime_get_ns();
				__u64 lat = now - tx;
				if (now < tx || lat > LAT_MAX_NS) {
					st->lat_bad++;
				} else {
					__u32 b = lat_bucket(lat);
					__u64 *c = bpf_map_lookup_elem(&count_lat, &b);
					if (c)
						*c += 1;
					st->lat_count++;
					st->lat_sum += lat;
					if (st->lat_min == 0 || lat < st->lat_min)
						st->lat_min = lat;
					if (lat > st->lat_max)
						st->lat_max = lat;
				}
			}
		}
	}
	return cfg->pass ? XDP_PASS : XDP_DROP;
}

char _license[] SEC("license") = "GPL";
