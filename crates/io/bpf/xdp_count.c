// SPDX-License-Identifier: GPL-2.0
// linerate's sink counter: counts packets and bytes per CPU and drops the
// frame (or passes it to the stack when configured). Optionally reads the
// big-endian u64 sequence number written by xdp_gen at a configured offset
// and keeps the largest seen (+1) per CPU.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define NO_SEQ 0xffffffffu
#define MAX_SEQ_OFF 4096

struct count_cfg {
	__u32 pass;    // 1: XDP_PASS, 0: XDP_DROP
	__u32 seq_off; // NO_SEQ: do not read a sequence number
};

struct count_stats {
	__u64 packets;
	__u64 bytes;
	__u64 max_seq;  // largest sequence number + 1 seen (0: none)
	__u64 no_seq;   // frames too short to hold the sequence number
};

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
	return cfg->pass ? XDP_PASS : XDP_DROP;
}

char _license[] SEC("license") = "GPL";
