// SPDX-License-Identifier: GPL-2.0
// linerate's in-kernel L2 forwarder: attached to two interfaces A and B,
// it redirects every frame received on A out of B and every frame received
// on B out of A through a DEVMAP, optionally rewriting the Ethernet
// addresses, and counts per direction and per CPU:
//   rx = fwd + drop_redirect + drop_malformed   (exactly, per direction)
// Frames arriving on an interface that is neither A nor B (not configured
// yet) are passed to the stack and counted as `other`.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct fwd_dir {
	__u32 ingress_ifindex; // frames received here go this direction
	__u32 rewrite;         // 1: write dst/src below into the frame
	__u8 dst[6];
	__u8 src[6];
};
_Static_assert(sizeof(struct fwd_dir) == 20, "struct fwd_dir: crates/io/src/xdp/fwd.rs FwdDir mirrors it (size asserted there too)");

struct fwd_stats {
	__u64 rx;
	__u64 rx_bytes;
	__u64 fwd;
	__u64 drop_redirect;  // bpf_redirect_map() failed (no such port)
	__u64 drop_malformed; // shorter than an Ethernet header
	__u64 other;          // arrived on an interface we do not serve: passed
};
_Static_assert(sizeof(struct fwd_stats) == 48, "struct fwd_stats: crates/io/src/xdp/fwd.rs RawFwdStats mirrors it (size asserted there too)");

// Key 0: A->B (ingress A), key 1: B->A (ingress B).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct fwd_dir);
} fwd_cfg SEC(".maps");

// Key 0: egress port for direction 0 (B), key 1: for direction 1 (A).
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} tx_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct fwd_stats);
} fwd_stats SEC(".maps");

SEC("xdp")
int xdp_fwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 dir = 0;
	struct fwd_dir *cfg = bpf_map_lookup_elem(&fwd_cfg, &dir);
	if (!cfg)
		return XDP_PASS;
	if (cfg->ingress_ifindex != ctx->ingress_ifindex) {
		dir = 1;
		cfg = bpf_map_lookup_elem(&fwd_cfg, &dir);
		if (!cfg)
			return XDP_PASS;
		if (cfg->ingress_ifindex != ctx->ingress_ifindex) {
			__u32 k = 0;
			struct fwd_stats *s0 = bpf_map_lookup_elem(&fwd_stats, &k);
			if (s0)
				s0->other++;
			return XDP_PASS;
		}
	}
	struct fwd_stats *st = bpf_map_lookup_elem(&fwd_stats, &dir);
	if (!st)
		return XDP_PASS;
	st->rx++;
	st->rx_bytes += data_end - data;
	if (data + 14 > data_end) {
		st->drop_malformed++;
		return XDP_DROP;
	}
	if (cfg->rewrite) {
		__builtin_memcpy(data, cfg->dst, 6);
		__builtin_memcpy(data + 6, cfg->src, 6);
	}
	// Flags 0: when the slot is empty the call returns XDP_ABORTED.
	long act = bpf_redirect_map(&tx_ports, dir, 0);
	if (act == XDP_REDIRECT) {
		st->fwd++;
		return XDP_REDIRECT;
	}
	st->drop_redirect++;
	return XDP_DROP;
}

char _license[] SEC("license") = "GPL";
