// SPDX-License-Identifier: GPL-2.0
// linerate switch's offloaded flows (`linerate switch --offload xdp`): one
// copy of this program per switch port, in place of `xsk_redirect`. It reads
// a frame's key exactly as the switch's fast key extraction does
// (crates/pipeline/src/switch/key.rs, Key::extract_fast_into: untagged IPv4
// without options, not a fragment, UDP or TCP with valid lengths; any other
// frame goes up), looks the eight packet words up in `sw_flows` (exact
// entries the switch installed from its pipeline's outcome for that key) and
//  - on a hit runs the entry: drop, or rewrite fields (checksums patched
//    by deltas the switch computed for that exact key) and redirect out of
//    the port through `sw_ports`; the entry's per-CPU counters in
//    `sw_slots` (folded by the switch into the rules' counters);
//  - on a miss, or when the entry's dec_ttl finds TTL <= 1, sends the frame
//    up its AF_XDP socket (`xsks_map[queue]`), as `xsk_redirect` does.
// Counted per CPU in `sw_stats`:
//   rx = up + fwd + drop_rule + drop_miss + drop_redirect
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define MAX_FLOWS 65536

struct sw_cfg {
	__u32 in_port; // this port's OpenFlow number (the key's in_port)
	__u32 cpu;     // NO_CPU, or: hand entries' frames to this CPU (sw_cpus)
};

#define NO_CPU 0xffffffff

struct sw_key {
	__u64 w[8];
};

#define ACT_DROP 1
#define ACT_DL_DST 2
#define ACT_DL_SRC 4
#define ACT_DEC_TTL 8
#define ACT_NW_SRC 16
#define ACT_NW_DST 32
#define ACT_TP_SRC 64
#define ACT_TP_DST 128
#define ACT_MISS 256 // with ACT_DROP: no rule matched (a table miss)

struct sw_act {
	__u32 slot;     // index into sw_slots
	__u32 flags;    // ACT_*
	__u32 out_port; // key into sw_ports (OpenFlow port number)
	__u32 ip_delta; // one's-complement sum added to the IPv4 header checksum
	__u32 l4_delta; // ... and to the TCP/UDP checksum
	__u8 dl_dst[6];
	__u8 dl_src[6];
	__u32 nw_src;   // network byte order
	__u32 nw_dst;
	__u16 tp_src;   // network byte order
	__u16 tp_dst;
};
_Static_assert(sizeof(struct sw_act) == 44, "struct sw_act: crates/io/src/xdp/switch_offload.rs SwAct mirrors it");

struct sw_slot {
	__u64 packets;
	__u64 bytes;
};

struct sw_stats {
	__u64 rx;
	__u64 up;            // sent up the AF_XDP socket (miss, other frames, TTL)
	__u64 up_ttl;        // of which: dec_ttl found TTL <= 1
	__u64 fwd;           // redirected out of a port
	__u64 drop_rule;     // the entry drops: its rule's actions
	__u64 drop_miss;     // the entry drops: a table miss
	__u64 drop_redirect; // the egress port is not in sw_ports
	__u64 to_cpu;        // handed to the forwarding CPU (sw_cpus)
	__u64 cpu_rx;        // taken there (to_cpu - cpu_rx: lost in its queue)
};
_Static_assert(sizeof(struct sw_stats) == 72, "struct sw_stats: crates/io/src/xdp/switch_offload.rs SwStats mirrors it");

#include "xsks_map.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sw_cfg);
} sw_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_FLOWS);
	// Elements freed after an RCU grace period: a program that found an
	// entry just before its removal never reads another flow's action.
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sw_key);
	__type(value, struct sw_act);
} sw_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_FLOWS);
	__type(key, __u32);
	__type(value, struct sw_slot);
} sw_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} sw_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sw_stats);
} sw_stats SEC(".maps");

// With a forwarding CPU: each entry's action by slot (what the frame's
// metadata names), for xdp_switch_cpu.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_FLOWS);
	__type(key, __u32);
	__type(value, struct sw_act);
} sw_acts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} sw_cpus SEC(".maps");

static __always_inline __u64 be16(const __u8 *p)
{
	return ((__u64)p[0] << 8) | p[1];
}

static __always_inline __u64 be32(const __u8 *p)
{
	return ((__u64)p[0] << 24) | ((__u64)p[1] << 16) | ((__u64)p[2] << 8) | p[3];
}

// The 48-bit MAC at p, shifted to bits 63..16 of a word.
static __always_inline __u64 mac_hi(const __u8 *p)
{
	return (be32(p) << 32) | (be16(p + 4) << 16);
}

// RFC 1624 eqn. 3 with the sum of (~old + new) over the changed words.
static __always_inline __u16 csum_apply(__u16 hc, __u32 delta)
{
	__u64 acc = (__u16)~hc;
	acc += delta;
	acc = (acc & 0xffff) + (acc >> 16);
	acc = (acc & 0xffff) + (acc >> 16);
	acc = (acc & 0xffff) + (acc >> 16);
	return ~(__u16)acc;
}

static __always_inline int up(struct xdp_md *ctx, struct sw_stats *st)
{
	st->up++;
	return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

static __always_inline int act(struct xdp_md *ctx, struct sw_stats *st, struct sw_act *a, __u64 len);

SEC("xdp")
int xdp_switch(struct xdp_md *ctx)
{
	__u8 *f = (void *)(long)ctx->data;
	__u8 *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct sw_stats *st = bpf_map_lookup_elem(&sw_stats, &zero);
	struct sw_cfg *cfg = bpf_map_lookup_elem(&sw_cfg, &zero);
	if (!st || !cfg)
		return XDP_PASS;
	st->rx++;
	// As Key::extract_fast_into: 14 + 20 + 8 bytes at least.
	if (f + 42 > end)
		return up(ctx, st);
	if (f[12] != 0x08 || f[13] != 0x00 || f[14] != 0x45)
		return up(ctx, st);
	__u8 *ip = f + 14;
	__u8 *l4 = ip + 20;
	__u64 len = end - f;
	__u64 total = be16(ip + 2);
	if (total < 20 || 14 + total > len || (be16(ip + 6) & 0x3fff) != 0)
		return up(ctx, st);
	__u64 seg = total - 20;
	__u8 proto = ip[9];
	__u64 tcp_flags = 0;
	if (proto == 17) {
		__u64 ulen = be16(l4 + 4);
		if (seg < 8 || ulen < 8 || ulen > seg)
			return up(ctx, st);
	} else if (proto == 6) {
		if (seg < 20 || l4 + 20 > end)
			return up(ctx, st);
		__u64 hl = (l4[12] >> 4) * 4;
		if (hl < 20 || hl > seg)
			return up(ctx, st);
		tcp_flags = be16(l4 + 12) & 0x01ff;
	} else {
		return up(ctx, st);
	}
	struct sw_key k;
	k.w[0] = ((__u64)cfg->in_port << 32) | (0x0800ULL << 16);
	k.w[1] = mac_hi(f) | ((__u64)proto << 8) | ip[1];
	k.w[2] = mac_hi(f + 6) | ((__u64)ip[8] << 8);
	k.w[3] = (tcp_flags << 52) | (be16(l4) << 36) | (be16(l4 + 2) << 20);
	k.w[4] = 0;
	k.w[5] = 0xffff00000000ULL | be32(ip + 12);
	k.w[6] = 0;
	k.w[7] = 0xffff00000000ULL | be32(ip + 16);
	struct sw_act *a = bpf_map_lookup_elem(&sw_flows, &k);
	if (!a)
		return up(ctx, st);
	__u32 fl = a->flags;
	if ((fl & ACT_DEC_TTL) && ip[8] <= 1) {
		// dec_ttl's expiry (a packet-in, maybe): the switch decides.
		st->up_ttl++;
		return up(ctx, st);
	}
	if (cfg->cpu != NO_CPU && !(fl & ACT_DROP)) {
		// The rest on the forwarding CPU: the slot in the metadata.
		if (bpf_xdp_adjust_meta(ctx, -4) == 0) {
			__u32 *m = (void *)(long)ctx->data_meta;
			if ((void *)(m + 1) <= (void *)(long)ctx->data) {
				*m = a->slot;
				long r = bpf_redirect_map(&sw_cpus, cfg->cpu, 0);
				if (r == XDP_REDIRECT) {
					st->to_cpu++;
					return XDP_REDIRECT;
				}
				st->drop_redirect++;
				return XDP_DROP;
			}
		}
	}
	return act(ctx, st, a, len);
}

// Run entry `a` on the frame (of the shape xdp_switch checked).
static __always_inline int act(struct xdp_md *ctx, struct sw_stats *st, struct sw_act *a, __u64 len)
{
	__u8 *f = (void *)(long)ctx->data;
	__u8 *end = (void *)(long)ctx->data_end;
	if (f + 42 > end)
		return XDP_DROP;
	__u8 *ip = f + 14;
	__u8 *l4 = ip + 20;
	__u8 proto = ip[9];
	__u32 fl = a->flags;
	__u32 slot = a->slot;
	struct sw_slot *c = bpf_map_lookup_elem(&sw_slots, &slot);
	if (c) {
		c->packets++;
		c->bytes += len;
	}
	if (fl & ACT_DROP) {
		if (fl & ACT_MISS)
			st->drop_miss++;
		else
			st->drop_rule++;
		return XDP_DROP;
	}
	if (fl & ACT_DL_DST)
		__builtin_memcpy(f, a->dl_dst, 6);
	if (fl & ACT_DL_SRC)
		__builtin_memcpy(f + 6, a->dl_src, 6);
	if (fl & (ACT_DEC_TTL | ACT_NW_SRC | ACT_NW_DST)) {
		if (fl & ACT_DEC_TTL)
			ip[8] -= 1;
		if (fl & ACT_NW_SRC)
			__builtin_memcpy(ip + 12, &a->nw_src, 4);
		if (fl & ACT_NW_DST)
			__builtin_memcpy(ip + 16, &a->nw_dst, 4);
		__u16 hc = (__u16)be16(ip + 10);
		hc = csum_apply(hc, a->ip_delta);
		ip[10] = hc >> 8;
		ip[11] = hc & 0xff;
	}
	if (fl & (ACT_NW_SRC | ACT_NW_DST | ACT_TP_SRC | ACT_TP_DST)) {
		if (fl & ACT_TP_SRC)
			__builtin_memcpy(l4, &a->tp_src, 2);
		if (fl & ACT_TP_DST)
			__builtin_memcpy(l4 + 2, &a->tp_dst, 2);
		__u8 *cs = proto == 17 ? l4 + 6 : l4 + 16;
		if (cs + 2 > end)
			return XDP_DROP;
		__u16 lc = (__u16)be16(cs);
		// UDP checksum 0: none (left alone); a result of 0 is sent as 0xffff.
		if (!(proto == 17 && lc == 0)) {
			lc = csum_apply(lc, a->l4_delta);
			if (proto == 17 && lc == 0)
				lc = 0xffff;
			cs[0] = lc >> 8;
			cs[1] = lc & 0xff;
		}
	}
	long r = bpf_redirect_map(&sw_ports, a->out_port, 0);
	if (r == XDP_REDIRECT) {
		st->fwd++;
		return XDP_REDIRECT;
	}
	st->drop_redirect++;
	return XDP_DROP;
}

// On the forwarding CPU (a CPUMAP entry's program): the entry xdp_switch
// found, by the slot in the metadata, run here.
SEC("xdp/cpumap")
int xdp_switch_cpu(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct sw_stats *st = bpf_map_lookup_elem(&sw_stats, &zero);
	if (!st)
		return XDP_DROP;
	st->cpu_rx++;
	__u32 *m = (void *)(long)ctx->data_meta;
	if ((void *)(m + 1) > (void *)(long)ctx->data) {
		st->drop_redirect++;
		return XDP_DROP;
	}
	__u32 slot = *m;
	struct sw_act *a = bpf_map_lookup_elem(&sw_acts, &slot);
	if (!a) {
		st->drop_redirect++;
		return XDP_DROP;
	}
	return act(ctx, st, a, ctx->data_end - ctx->data);
}

char _license[] SEC("license") = "GPL";
