// SPDX-License-Identifier: GPL-2.0
// The benchmark reference "bare XDP_REDIRECT": redirect every frame to the
// port stored under its ingress ifindex in a DEVMAP_HASH, nothing else (no
// counters, no checks). Frames with no entry are aborted.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} bare_ports SEC(".maps");

SEC("xdp")
int xdp_redirect_bare(struct xdp_md *ctx)
{
	return bpf_redirect_map(&bare_ports, ctx->ingress_ifindex, 0);
}

char _license[] SEC("license") = "GPL";
