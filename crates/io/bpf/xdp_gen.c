// SPDX-License-Identifier: GPL-2.0
// linerate's in-kernel generator. Not attached anywhere: user space runs it
// with BPF_PROG_RUN and BPF_F_TEST_XDP_LIVE_FRAMES, and the kernel turns
// XDP_TX into a transmission out of the `ingress_ifindex` given in the
// context. Frames come from a page pool initialised once from the template
// and reused as they are, so every per-packet field is rewritten here on
// every run: the headers (restored from the template), the UDP source
// port (flows > 1) and the sequence number.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define NO_SEQ 0xffffffffu
#define MAX_OFF 4096

struct gen_cfg {
	__u32 flows;     // > 1: UDP source port = base_port + n % flows
	__u32 port_off;  // offset of the UDP source port in the frame
	__u32 base_port; // host order
	__u32 seq_off;   // NO_SEQ or offset of a big-endian u64 sequence number
	__u32 hdr_len;   // bytes of hdr[] restored into every frame (multiple of 8)
	__u32 pad;
	__u64 hdr[8];    // the template's first 64 bytes
};

struct gen_stats {
	__u64 runs; // program runs on this CPU (frames handed to XDP_TX)
	__u64 bad;  // configured offsets out of the frame (aborted)
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_cfg);
} gen_cfg SEC(".maps");

// The sequence counter, shared by all CPUs (one atomic add per frame when
// sequence numbers are on; uncontended with one generator thread).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} gen_seq SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_stats);
} gen_stats SEC(".maps");

SEC("xdp")
int xdp_gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 k = 0;
	struct gen_cfg *cfg = bpf_map_lookup_elem(&gen_cfg, &k);
	struct gen_stats *st = bpf_map_lookup_elem(&gen_stats, &k);
	if (!cfg || !st)
		return XDP_ABORTED;
	__u64 n = st->runs;
	// A DuT may have rewritten this frame in place on its last trip (MACs,
	// TTL, checksum: the page is shared): restore the template's headers.
	__u64 *w = data;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		if ((__u32)(i * 8) >= cfg->hdr_len || (void *)(w + i + 1) > data_end)
			break;
		w[i] = cfg->hdr[i];
	}
	if (cfg->flows > 1) {
		__u32 off = cfg->port_off;
		if (off > MAX_OFF)
			goto bad;
		__u8 *p = data + off;
		if ((void *)(p + 2) > data_end)
			goto bad;
		__u16 port = cfg->base_port + (__u32)(n % cfg->flows);
		p[0] = port >> 8;
		p[1] = port & 0xff;
	}
	if (cfg->seq_off != NO_SEQ) {
		__u32 off = cfg->seq_off;
		if (off > MAX_OFF)
			goto bad;
		__u8 *p = data + off;
		if ((void *)(p + 8) > data_end)
			goto bad;
		__u64 *ctr = bpf_map_lookup_elem(&gen_seq, &k);
		if (!ctr)
			goto bad;
		__u64 seq = __sync_fetch_and_add(ctr, 1);
		seq = __builtin_bswap64(seq);
		__builtin_memcpy(p, &seq, 8);
	}
	st->runs = n + 1;
	return XDP_TX;
bad:
	st->bad++;
	return XDP_ABORTED;
}

char _license[] SEC("license") = "GPL";
