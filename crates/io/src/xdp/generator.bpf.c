// SPDX-License-Identifier: GPL-2.0
// linerate's in-kernel generator. Not attached anywhere: user space runs it
// with BPF_PROG_RUN and BPF_F_TEST_XDP_LIVE_FRAMES, and the kernel turns
// XDP_TX into a transmission out of the `ingress_ifindex` given in the
// context. Frames come from a page pool initialised once per call from the
// template and reused as they are, so every per-packet field is rewritten
// here on every run: the headers (restored from the template), the UDP
// source port (flows > 1) and the measurement signature.
//
// Signature (crates/wire/src/signature.rs), 24 bytes big-endian:
//   magic "LRSG" u32 | stream u16 | flags u16 | seq u64 | tx_ns u64
// Sampled packets (seq % sample_every == 0) carry it with FLAG_TS and the
// time of bpf_ktime_get_ns() (CLOCK_MONOTONIC) taken last, just before the
// program returns; the others carry 24 zero bytes.
//
// A mix of frame lengths (IMIX): the template is the longest; each frame is
// cut (or grown) to its length with bpf_xdp_adjust_tail and gets that
// length's headers; the pattern repeats every mix_n frames by the tag's
// sequence number, so the mix is exact over every whole pattern.
//
// Tag (crates/io/src/xdp/count.rs, read by xdp_count's verification), 18
// bytes big-endian, fits the payload of a 64-byte IPv4 UDP frame:
//   magic "LT" u16 | stream u16 | seq u48 | tx_ns u64 (0: not stamped)
// on every frame; seq counts from 0 from the last time user space zeroed
// gen_seq (one trial), tx_ns on frames with seq % tag_every == 0 that
// leave at once (the last run of their kernel batch: see stamp_batch).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define NO_SIG 0xffffffffu
#define MAX_OFF 4096
#define SIG_MAGIC 0x4c525347u
#define FLAG_TS 1
#define TAG_MAGIC 0x4c54
#define TAG_LEN 18
#define MIX_MAX 16
#define MIX_CLASSES 4

struct gen_cfg {
	__u32 flows;     // > 1: UDP source port = base_port + n % flows
	__u32 port_off;  // offset of the UDP source port in the frame
	__u32 base_port; // host order
	__u32 sig_off;   // NO_SIG or offset of the 24-byte signature
	__u32 hdr_len;   // bytes of hdr[] restored into every frame (multiple of 8)
	__u32 sample_every; // >= 1: signature on packets with seq % sample_every == 0
	__u32 stream;    // stream id (u16)
	__u32 ts_off;    // NO_SIG or offset of a bare big-endian u64 TX time
	__u32 ts_every;  // >= 1: TX time on runs n with n % ts_every == 0, else 0
	__u32 tag_off;   // NO_SIG or offset of the 18-byte tag
	__u32 tag_every; // >= 1: TX time in the tag when seq % tag_every == 0
	__u32 mix_n;     // 0: every frame is the template; else a mix of frame
	                 // lengths repeating every mix_n (<= MIX_MAX) frames
	__u64 hdr[8];    // the template's first 64 bytes
	// The mix (an IMIX): frame seq (the tag's sequence number) is
	// mix_len[mix_class[seq % mix_n]] bytes long, its first
	// mix_hdr_len[class] bytes from mix_hdr[class] (the headers with that
	// length's IPv4 total length, checksum and UDP length).
	__u8 mix_class[MIX_MAX];
	__u32 mix_len[MIX_CLASSES];
	__u32 mix_hdr_len[MIX_CLASSES];
	__u64 mix_hdr[MIX_CLASSES][8];
	// The kernel's batch size of the calls (runs per batch; 0 or 1: every
	// run is its batch's last). A frame handed to XDP_TX leaves when its
	// batch is flushed, after the batch's later runs; the tag's TX time is
	// written only on a batch's last run, whose frame leaves at once: a
	// stamped frame never waits for its batch (user space makes every
	// paced call whole batches, so that batch_pos below stays aligned).
	__u32 stamp_batch;
	__u32 _pad0;
};
_Static_assert(sizeof(struct gen_cfg) == 424, "struct gen_cfg: crates/io/src/xdp/generator.rs RawGenCfg mirrors it (size asserted there too)");

struct gen_stats {
	__u64 runs; // program runs on this CPU (frames handed to XDP_TX)
	__u64 bad;  // configured offsets out of the frame (aborted)
	__u64 idle; // paced runs that sent nothing (XDP_DROP)
	// The send span, stamped on every 64th frame (runs % 64 == 0): time
	// and `runs` of the first stamp since user space zeroed first_ns, and
	// of the latest. User space gets the rate frames actually left at
	// from these, without a call's set-up and teardown (~35 ms of a
	// BPF_PROG_RUN call in which nothing is sent) in the wall time.
	__u64 first_ns;
	__u64 first_runs;
	__u64 last_ns;
	__u64 last_runs;
	// Every run on this CPU (idle ones too) since user space zeroed it:
	// batch_pos % stamp_batch is the run's place in its kernel batch (a
	// batch runs on one CPU without preemption).
	__u64 batch_pos;
};
_Static_assert(sizeof(struct gen_stats) == 64, "struct gen_stats: crates/io/src/xdp/generator.rs RawGenStats mirrors it (size asserted there too)");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_cfg);
} gen_cfg SEC(".maps");

// The sequence counter, shared by all CPUs (one atomic add per frame when
// the signature is on; uncontended with one generator thread). It counts
// every packet, sampled or not.
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

// In-program pacing: a frame n (counted from the schedule's start) is due
// at start_ns + (n * gap_fp >> 16) (gap in 1/65536 ns: no drift from a
// rounded interval; the product overflows after ~78 hours of schedule).
// start_ns 0 means "the first run": the schedule starts when the program
// first runs, not when user space wrote it, because a BPF_PROG_RUN call
// spends ~10-15 ms setting up (its page pool) before the first run, and
// frames due in that time would leave as one burst at top speed.
// Runs before the frame is due, after `limit` frames or at/after
// start_ns + span_ns return XDP_DROP without sending and count as `idle`.
// A frame late (the program did not run for a while: between calls,
// preempted) goes out as soon as it runs, so the long-run count keeps to
// the schedule; `max_late` records the worst such slip.
// With `max_lag` set, a frame more than max_lag late does not start a
// catch-up burst: the schedule slips (start_ns moves on, compare-and-swap)
// so that the frame is due now and the ones after it keep their spacing.
// The stream then has a gap where the program did not run instead of a
// burst after it: what latency trials need (an even load; a burst queues
// in the DuT and its frames' latency is the generator's, not the DuT's).
// `slipped` sums the slips (ns) and `slips` counts them.
// User space may run two calls at once on two CPUs (overlapping so that
// the program always runs while the other call tears down): a frame is
// claimed by a compare-and-swap on `sent`, so the count stays exact.
struct gen_pace {
	__u64 on;       // 0: not paced (every run sends)
	__u64 start_ns; // bpf_ktime_get_ns() of frame 0 (0: set by the first run)
	__u64 gap_fp;   // interval between frames, 1/65536 ns
	__u64 limit;    // frames to send under this schedule
	__u64 span_ns;  // no frame at or after start_ns + span_ns
	__u64 sent;     // frames sent under this schedule (atomic)
	__u64 max_late; // largest now - due of a sent frame (ns; racy max)
	__u64 max_lag;  // 0: catch up; else slip the schedule past this lateness
	__u64 slipped;  // ns the schedule slipped in all (atomic)
	__u64 slips;    // how many times it slipped (atomic)
};
_Static_assert(sizeof(struct gen_pace) == 80, "struct gen_pace: crates/io/src/xdp/generator.rs RawPace mirrors it (size asserted there too)");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_pace);
} gen_pace SEC(".maps");

SEC("xdp")
int xdp_gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 k = 0;
	struct gen_cfg *cfg = bpf_map_lookup_elem(&gen_cfg, &k);
	struct gen_stats *st = bpf_map_lookup_elem(&gen_stats, &k);
	struct gen_pace *pc = bpf_map_lookup_elem(&gen_pace, &k);
	if (!cfg || !st || !pc)
		return XDP_ABORTED;
	// The run's place in its kernel batch (tested only where a frame may
	// be stamped: no division on the other runs).
	__u64 pos = st->batch_pos++;
	if (pc->on) {
		__u64 done = *(volatile __u64 *)&pc->sent;
		if (done >= pc->limit)
			goto idle;
		__u64 now = bpf_ktime_get_ns();
		__u64 start = *(volatile __u64 *)&pc->start_ns;
		if (!start) {
			__sync_val_compare_and_swap(&pc->start_ns, 0, now);
			start = *(volatile __u64 *)&pc->start_ns;
		}
		// now < start: the other CPU started the schedule a moment later.
		if (now < start || now - start >= pc->span_ns)
			goto idle;
		__u64 due = start + ((done * pc->gap_fp) >> 16);
		if (now < due)
			goto idle;
		if (pc->max_lag && now - due > pc->max_lag) {
			// Slip: move the start so that frame `done` is due now. The
			// other CPU may have slipped or sent meanwhile: then retry on
			// the next run with its schedule.
			__u64 lag = now - due;
			if (__sync_val_compare_and_swap(&pc->start_ns, start, start + lag) != start)
				goto idle;
			__sync_fetch_and_add(&pc->slipped, lag);
			__sync_fetch_and_add(&pc->slips, 1);
			due = now;
		}
		if (__sync_val_compare_and_swap(&pc->sent, done, done + 1) != done)
			goto idle; // the other CPU took frame `done`
		// How late the schedule ran (a catch-up burst follows a late
		// frame). Two CPUs may race here: the max is approximate.
		if (now - due > pc->max_late)
			pc->max_late = now - due;
	}
	__u64 n = st->runs;
	if ((n & 63) == 0) {
		__u64 t = bpf_ktime_get_ns();
		if (!st->first_ns) {
			st->first_ns = t;
			st->first_runs = n;
		}
		st->last_ns = t;
		st->last_runs = n;
	}
	// A mix of lengths: this frame's length from its sequence number (the
	// tag's, taken here once), set with bpf_xdp_adjust_tail (the length
	// a page had on its last trip may stay: the kernel resets a recycled
	// frame only when its start moved), then its class's headers.
	__u64 seq = 0;
	int have_seq = 0;
	if (cfg->mix_n) {
		__u64 *ctr = bpf_map_lookup_elem(&gen_seq, &k);
		if (!ctr)
			goto bad;
		seq = __sync_fetch_and_add(ctr, 1);
		have_seq = 1;
		__u32 pos = seq % cfg->mix_n;
		if (pos >= MIX_MAX)
			goto bad;
		__u32 cls = cfg->mix_class[pos] & (MIX_CLASSES - 1);
		int delta = (int)cfg->mix_len[cls] - (int)(data_end - data);
		if (delta && bpf_xdp_adjust_tail(ctx, delta))
			goto bad;
		data = (void *)(long)ctx->data;
		data_end = (void *)(long)ctx->data_end;
		__u64 *w = data;
#pragma unroll
		for (int i = 0; i < 8; i++) {
			if ((__u32)(i * 8) >= cfg->mix_hdr_len[cls] || (void *)(w + i + 1) > data_end)
				break;
			w[i] = cfg->mix_hdr[cls][i];
		}
	} else {
		// A DuT may have rewritten this frame in place on its last trip
		// (MACs, TTL, checksum: the page is shared): restore the
		// template's headers.
		__u64 *w = data;
#pragma unroll
		for (int i = 0; i < 8; i++) {
			if ((__u32)(i * 8) >= cfg->hdr_len || (void *)(w + i + 1) > data_end)
				break;
			w[i] = cfg->hdr[i];
		}
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
	if (cfg->sig_off != NO_SIG) {
		__u32 off = cfg->sig_off;
		if (off > MAX_OFF)
			goto bad;
		__u8 *p = data + off;
		if ((void *)(p + 24) > data_end)
			goto bad;
		__u64 *ctr = bpf_map_lookup_elem(&gen_seq, &k);
		if (!ctr)
			goto bad;
		__u64 seq = __sync_fetch_and_add(ctr, 1);
		__u32 every = cfg->sample_every;
		if (every <= 1 || seq % every == 0) {
			__u32 head = __builtin_bswap32(SIG_MAGIC);
			__u32 sf = __builtin_bswap32(((cfg->stream & 0xffff) << 16) | FLAG_TS);
			__u64 s = __builtin_bswap64(seq);
			__builtin_memcpy(p, &head, 4);
			__builtin_memcpy(p + 4, &sf, 4);
			__builtin_memcpy(p + 8, &s, 8);
			st->runs = n + 1;
			// As late as the program can: the last thing before XDP_TX.
			__u64 t = __builtin_bswap64(bpf_ktime_get_ns());
			__builtin_memcpy(p + 16, &t, 8);
			return XDP_TX;
		}
		__u64 z = 0;
		__builtin_memcpy(p, &z, 8);
		__builtin_memcpy(p + 8, &z, 8);
		__builtin_memcpy(p + 16, &z, 8);
	}
	// The tag: every frame, its own sequence number (the sink verifies
	// that each frame it counts was sent in this trial, once).
	if (cfg->tag_off != NO_SIG) {
		__u32 off = cfg->tag_off;
		if (off > MAX_OFF)
			goto bad;
		__u8 *p = data + off;
		if ((void *)(p + TAG_LEN) > data_end)
			goto bad;
		if (!have_seq) {
			__u64 *ctr = bpf_map_lookup_elem(&gen_seq, &k);
			if (!ctr)
				goto bad;
			seq = __sync_fetch_and_add(ctr, 1);
		}
		__u32 head = __builtin_bswap32((TAG_MAGIC << 16) | (cfg->stream & 0xffff));
		__u64 s = __builtin_bswap64(seq << 16); // 48 bits, big-endian
		__builtin_memcpy(p, &head, 4);
		__builtin_memcpy(p + 4, &s, 6);
		__u32 every = cfg->tag_every;
		__u64 t = 0;
		st->runs = n + 1;
		__u32 sb = cfg->stamp_batch;
		if ((every <= 1 || seq % every == 0) && (sb <= 1 || pos % sb == sb - 1))
			t = __builtin_bswap64(bpf_ktime_get_ns());
		__builtin_memcpy(p + 10, &t, 8);
		return XDP_TX;
	}
	// The bare TX time (for frames too short for the 24-byte signature,
	// e.g. 64-byte frames: read by xdp_count's latency histogram).
	if (cfg->ts_off != NO_SIG) {
		__u32 off = cfg->ts_off;
		if (off > MAX_OFF)
			goto bad;
		__u8 *p = data + off;
		if ((void *)(p + 8) > data_end)
			goto bad;
		__u32 every = cfg->ts_every;
		__u64 t = 0;
		st->runs = n + 1;
		if (every <= 1 || n % every == 0)
			t = __builtin_bswap64(bpf_ktime_get_ns());
		__builtin_memcpy(p, &t, 8);
		return XDP_TX;
	}
	st->runs = n + 1;
	return XDP_TX;
bad:
	st->bad++;
	return XDP_ABORTED;
idle:
	st->idle++;
	return XDP_DROP;
}

char _license[] SEC("license") = "GPL";
