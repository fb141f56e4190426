// SPDX-License-Identifier: GPL-2.0
// The smallest XDP program: pass everything to the stack. Attached to the
// receiving end of a veth so that the kernel's native XDP path (NAPI on
// the peer) is active and XDP_REDIRECT / XDP_TX into it are not dropped.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
