// SPDX-License-Identifier: GPL-2.0
// linerate's sink counter: counts packets and bytes per CPU and drops the
// frame (or passes it to the stack when configured). Optionally reads the
// big-endian u64 sequence number written by xdp_gen at a configured offset
// and keeps the largest seen (+1) per CPU. Optionally reads the bare
// big-endian u64 TX time xdp_gen writes (ts_off) and records the one-way
// latency (bpf_ktime_get_ns() here minus the TX time: both programs read
// the same CLOCK_MONOTONIC) in a log-linear histogram.
//
// Verified frames (tag_off set): every frame must carry xdp_gen's 18-byte
// tag (magic "LT" u16 | stream u16 | seq u48 | tx_ns u64). A frame
// without it is foreign (the network's own ARP, LLDP, a DuT's invention);
// one of another stream is stale (sent in an earlier trial, arriving
// late); a sequence number seen before in this stream is a duplicate (a
// bit per sequence number in count_seen, set with an atomic fetch-or, so
// it holds with the program running on several CPUs at once); a sequence
// number below the largest this CPU saw before is reordered. Only
// verified frames (this stream, first time) are timed. User space sets
// the stream before each trial and zeroes the half of count_seen that
// stream uses (its parity: the other half may still take a straggler of
// the trial before, which then cannot mark a frame of this one).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define NO_SEQ 0xffffffffu
#define MAX_SEQ_OFF 4096
#define TAG_MAGIC 0x4c54
#define TAG_LEN 18
// Bits per half of count_seen: sequence numbers a trial can verify.
#define SEEN_HALF_WORDS (1u << 21)
#define SEEN_HALF_BITS ((__u64)SEEN_HALF_WORDS * 64)

struct count_cfg {
	__u32 pass;    // 1: XDP_PASS, 0: XDP_DROP
	__u32 seq_off; // NO_SEQ: do not read a sequence number
	__u32 ts_off;  // NO_SEQ: no TX time to read
	__u32 tag_off; // NO_SEQ: frames are not verified (no tag)
	__u32 stream;  // the stream of this trial (tag_off set)
	__u32 arp_ip;  // 0, or an IPv4 address (network order) whose ARP
	               // requests are passed to the stack uncounted
};
_Static_assert(sizeof(struct count_cfg) == 24, "struct count_cfg: crates/io/src/xdp/count.rs CountCfg mirrors it (size asserted there too)");

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
	// Verification (tag_off set): packets = verified + foreign + stale
	// + dup + beyond.
	__u64 verified;  // this stream's frames, each sequence number once
	__u64 foreign;   // no tag (too short, wrong magic)
	__u64 stale;     // another stream's (an earlier trial's)
	__u64 dup;       // a sequence number seen before in this stream
	__u64 beyond;    // sequence number past count_seen: counted, unchecked
	__u64 reordered; // verified, below the largest this CPU saw before
	__u64 cur;       // stream + 1 this CPU last verified (0: none)
	__u64 next_seq;  // largest sequence number + 1 this CPU verified in it
	__u64 arp_passed; // ARP requests for arp_ip passed (not in packets)
};
_Static_assert(sizeof(struct count_stats) == 144, "struct count_stats: crates/io/src/xdp/count.rs RawCountStats mirrors it (size asserted there too)");

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

// A bit per sequence number, two halves (stream parity); mmap-able so user
// space zeroes a half with one memset.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2 * SEEN_HALF_WORDS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} count_seen SEC(".maps");

static __always_inline void record_latency(struct count_stats *st, __u64 tx)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 lat = now - tx;
	if (now < tx || lat > LAT_MAX_NS) {
		st->lat_bad++;
		return;
	}
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

// The tag at p (TAG_LEN bytes inside the frame): verify, time.
static __always_inline void verify(struct count_cfg *cfg, struct count_stats *st, __u8 *p)
{
	if (p[0] != (TAG_MAGIC >> 8) || p[1] != (TAG_MAGIC & 0xff)) {
		st->foreign++;
		return;
	}
	__u32 stream = ((__u32)p[2] << 8) | p[3];
	if (stream != (cfg->stream & 0xffff)) {
		st->stale++;
		return;
	}
	__u64 seq = 0;
	__builtin_memcpy(&seq, p + 4, 6);
	seq = __builtin_bswap64(seq) >> 16;
	if (st->cur != stream + 1) {
		// This CPU's first frame of the trial: its exact min/max start here.
		st->cur = stream + 1;
		st->next_seq = 0;
		st->lat_min = 0;
		st->lat_max = 0;
	}
	if (seq >= SEEN_HALF_BITS) {
		st->beyond++;
	} else {
		__u32 w = (stream & 1) * SEEN_HALF_WORDS + (__u32)(seq >> 6);
		__u64 *word = bpf_map_lookup_elem(&count_seen, &w);
		if (!word) {
			st->beyond++;
			return;
		}
		__u64 bit = 1ull << (seq & 63);
		if (__sync_fetch_and_or(word, bit) & bit) {
			st->dup++;
			return;
		}
		st->verified++;
	}
	if (seq < st->next_seq)
		st->reordered++;
	else
		st->next_seq = seq + 1;
	__u64 tx;
	__builtin_memcpy(&tx, p + 10, 8);
	tx = __builtin_bswap64(tx);
	if (tx)
		record_latency(st, tx);
}

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
	// The tester's own address on an external port (TRex's L3 mode): an
	// ARP request for it goes to the stack (where the tester's packet
	// socket answers it: an XDP_TX reply would not reach a veth peer
	// without an XDP program of its own) and is not counted.
	if (cfg->arp_ip) {
		__u8 *e = data;
		if ((void *)(e + 42) <= data_end && e[12] == 0x08 && e[13] == 0x06 &&
		    e[20] == 0 && e[21] == 1 && __builtin_memcmp(e + 38, &cfg->arp_ip, 4) == 0) {
			st->arp_passed++;
			return XDP_PASS;
		}
	}
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
	off = cfg->tag_off;
	if (off != NO_SEQ) {
		if (off > MAX_SEQ_OFF) {
			st->foreign++;
		} else {
			__u8 *p = data + off;
			if ((void *)(p + TAG_LEN) > data_end)
				st->foreign++;
			else
				verify(cfg, st, p);
		}
		return cfg->pass ? XDP_PASS : XDP_DROP;
	}
	off = cfg->ts_off;
	if (off != NO_SEQ && off <= MAX_SEQ_OFF) {
		__u8 *p = data + off;
		if ((void *)(p + 8) <= data_end) {
			__u64 tx;
			__builtin_memcpy(&tx, p, 8);
			tx = __builtin_bswap64(tx);
			if (tx)
				record_latency(st, tx);
		}
	}
	return cfg->pass ? XDP_PASS : XDP_DROP;
}

char _license[] SEC("license") = "GPL";
