// SPDX-License-Identifier: GPL-2.0
// The AF_XDP sockets by RX queue: the map user space fills (crates/io/src/
// afxdp, by the name "xsks_map") and a program redirects to with
// bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS). One
// definition for every program that sends frames up an AF_XDP socket.
#ifndef LINERATE_XSKS_MAP_H
#define LINERATE_XSKS_MAP_H
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

#endif
