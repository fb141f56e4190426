// SPDX-License-Identifier: GPL-2.0
// Redirect every frame of an RX queue that has an AF_XDP socket to that
// socket. Queues without a socket in `xsks_map` fall back to XDP_PASS (the
// action in the low bits of the flags), so the stack sees them untouched.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "xsks_map.h"

SEC("xdp")
int xsk_redirect(struct xdp_md *ctx)
{
	return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char _license[] SEC("license") = "GPL";
